package install

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
)

// No Docker engine runs here, so the Dockerfile is checked against what the
// rest of the repository expects of the image.
var _ = Describe("The Dockerfile", func() {
	var dockerfile string
	BeforeEach(func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
		Expect(err).NotTo(HaveOccurred())
		dockerfile = string(raw)
	})

	It("runs on distroless as the nonroot user", func() {
		froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(dockerfile, -1)
		Expect(froms).NotTo(BeEmpty())
		// The base image is an ARG, which the release pins by digest.
		base := froms[len(froms)-1][1]
		if arg, ok := strings.CutPrefix(base, "${"); ok {
			arg = strings.TrimSuffix(arg, "}")
			m := regexp.MustCompile(`(?m)^ARG ` + regexp.QuoteMeta(arg) + `=(\S+)$`).FindStringSubmatch(dockerfile)
			Expect(m).NotTo(BeNil(), "ARG %s has no default", arg)
			base = m[1]
		}
		Expect(base).To(MatchRegexp(`^gcr\.io/distroless/static:nonroot(@sha256:[a-f0-9]{64})?$`))
		Expect(dockerfile).To(MatchRegexp(`(?m)^USER 65532:65532$`))
		Expect(dockerfile).To(MatchRegexp(`(?m)^ENTRYPOINT \["/manager"\]$`))
	})

	// built maps each binary of the image to its command directory.
	built := func() map[string]string {
		GinkgoHelper()
		out := map[string]string{}
		for _, sm := range regexp.MustCompile(`-o /out/(\S+) \./cmd/(\S+)`).FindAllStringSubmatch(dockerfile, -1) {
			Expect(sm[1]).To(Equal(sm[2]), "the binary of ./cmd/%s is named after it", sm[2])
			out["/"+sm[1]] = "cmd/" + sm[2]
		}
		Expect(out).To(HaveKey("/manager"), "the ENTRYPOINT is not built")
		return out
	}

	It("builds every command, and nothing else", func() {
		image := built()
		var commands []string
		entries, err := os.ReadDir(filepath.Join(repoRoot, "cmd"))
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if e.IsDir() {
				commands = append(commands, "cmd/"+e.Name())
			}
		}
		Expect(slices.Collect(maps.Values(image))).To(ConsistOf(commands))
	})

	It("builds every binary the shipped manifests run from the project's image", func() {
		image := built()
		// The samples also run other images (a stock MCP server); only the
		// commands run from this image must be built into it.
		ours := func(ref string) bool {
			return strings.HasPrefix(ref, "ghcr.io/toolplane/toolplane:") || strings.HasPrefix(ref, "ghcr.io/toolplane/toolplane@") ||
				strings.HasPrefix(ref, "controller:")
		}
		checked := 0
		for _, r := range renderings() {
			for _, u := range r.objects.ofKind("Deployment") {
				for _, c := range fromUnstructured[appsv1.Deployment](u).Spec.Template.Spec.Containers {
					if len(c.Command) == 0 || !ours(c.Image) {
						continue
					}
					Expect(image).To(HaveKey(c.Command[0]), "%s: %s runs %s", r.name, u.GetName(), c.Command[0])
					checked++
				}
			}
		}
		Expect(checked).To(BeNumerically(">", 0), "no Deployment runs a command of the image: the check above checked nothing")
	})

	It("keeps build outputs and tools out of the build context", func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
		Expect(err).NotTo(HaveOccurred())
		var ignored []string
		for line := range strings.Lines(string(raw)) {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") {
				ignored = append(ignored, strings.TrimSuffix(line, "/"))
			}
		}
		for _, p := range []string{"bin", ".git"} {
			Expect(slices.Contains(ignored, p)).To(BeTrue(), ".dockerignore lets %s/ into the build context", p)
		}
	})
})
