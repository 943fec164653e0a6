package controllers

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// globRules reads, from the generated CRD, the CEL rule the API server
// applies to each spec.include and spec.exclude pattern, as the RE2 regular
// expression it matches against (CEL's matches is RE2, as Go's regexp is).
func globRules(tb testing.TB) map[string]*regexp.Regexp {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "toolplane.io_toolsets.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		tb.Fatal(err)
	}
	specProps := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	rules := map[string]*regexp.Regexp{}
	for _, field := range []string{"include", "exclude"} {
		items := specProps[field].Items
		if items == nil || items.Schema == nil || len(items.Schema.XValidations) != 1 {
			tb.Fatalf("spec.%s items carry no single CEL rule", field)
		}
		rule := items.Schema.XValidations[0].Rule
		re, prefixed := strings.CutPrefix(rule, "self.matches(r'")
		re, suffixed := strings.CutSuffix(re, "')")
		if !prefixed || !suffixed || strings.Contains(re, "'") {
			tb.Fatalf("spec.%s rule is not self.matches(r'...'): %s", field, rule)
		}
		rules[field] = regexp.MustCompile(re)
	}
	return rules
}

// globValid is the runtime check the reconciler applies (validatePatterns).
func globValid(p string) bool {
	_, err := path.Match(p, "")
	return err == nil
}

// TestGlobRuleAgreesWithPathMatch checks that the API server admits exactly
// the include and exclude patterns that path.Match accepts, so a pattern the
// reconciler would refuse at runtime is refused at admission instead, and no
// pattern it accepts is refused: every pattern of up to five characters
// over the characters that mean something to path.Match, and some more.
func TestGlobRuleAgreesWithPathMatch(t *testing.T) {
	alphabet := []byte{'a', '*', '?', '[', ']', '^', '-', '\\', '/', '\n'}
	for field, re := range globRules(t) {
		checked := 0
		var walk func(p []byte, depth int)
		walk = func(p []byte, depth int) {
			s := string(p)
			if got, want := re.MatchString(s), globValid(s); got != want {
				t.Errorf("spec.%s pattern %q: admitted %t, path.Match accepts %t", field, s, got, want)
			}
			checked++
			if depth == 0 {
				return
			}
			for _, c := range alphabet {
				walk(append(p, c), depth-1)
			}
		}
		walk(nil, 5)
		for _, s := range []string{"query_*", "[a-z]*_v[0-9]", "[^_]?", `\[literal`, "a]b", "[]a]", "[^]", "[a-]", "[-a]", `[\-a]`, "x[", `x\`, "é[ü-ÿ]", "[a-b-c]"} {
			if got, want := re.MatchString(s), globValid(s); got != want {
				t.Errorf("spec.%s pattern %q: admitted %t, path.Match accepts %t", field, s, got, want)
			}
			checked++
		}
		t.Logf("spec.%s: %d patterns agree", field, checked)
	}
}

// FuzzGlobRule looks for a pattern on which admission and path.Match part.
func FuzzGlobRule(f *testing.F) {
	for _, s := range []string{"query_*", "[a-z]", "[^]", `a\`, "[]", "[a-]", "[\\]]"} {
		f.Add(s)
	}
	re := globRules(f)["include"]
	f.Fuzz(func(t *testing.T, s string) {
		// The API server holds only valid UTF-8 strings.
		if !utf8.ValidString(s) {
			return
		}
		if got, want := re.MatchString(s), globValid(s); got != want {
			t.Errorf("pattern %q: admitted %t, path.Match accepts %t", s, got, want)
		}
	})
}
