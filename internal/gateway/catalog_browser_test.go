package gateway_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/toolkit/spec"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the catalog's screenshots into docs/")

// chromium returns the path of a Chromium to drive. Off CI (CI unset) a
// machine without one skips the browser tests; on CI it fails them, so
// that the check cannot silently vanish (make browser-deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "" {
		t.Skip("Chromium is not installed: make browser-deps installs Debian's chromium")
	}
	t.Fatal("Chromium is not installed on CI: make browser-deps installs Debian's chromium")
	return ""
}

// browser starts a headless Chromium with a fresh profile and nothing that
// reaches out of the machine.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// catalogTable is a small cluster's tools, for the screenshots.
func catalogTable(f *searchFixture) *spec.Table {
	extra := []spec.TableTool{
		{Name: "github_create_issue", Title: "Create an issue", Description: "Opens an issue in a GitHub repository with a title, body and labels",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"repo":{"type":"string","description":"owner/name"},"title":{"type":"string"},"body":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}}},"required":["repo","title"]}`),
			ToolSet:     spec.ObjectReference{Namespace: "dev", Name: "github-tools"}, Meta: map[string]any{spec.MetaCategory: "dev"}},
		{Name: "k8s_list_pods", Title: "List Pods", Description: "Lists the Pods of a namespace with their phase, restarts and age",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"namespace":{"type":"string"},"labelSelector":{"type":"string"}},"required":["namespace"]}`),
			Annotations: &spec.Annotations{ReadOnlyHint: ptr(true)},
			ToolSet:     spec.ObjectReference{Namespace: "platform", Name: "cluster-tools"}},
		{Name: "weather_air_quality", Description: "The air quality index of a city, with the main pollutant",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
			ToolSet:     spec.ObjectReference{Namespace: "weather", Name: "weather-tools"}},
	}
	for i := range extra {
		e := &extra[i]
		e.SourceName = e.Name
		host := "http://" + e.ToolSet.Name + "." + e.ToolSet.Namespace + ".svc:8080"
		e.Endpoints = &spec.Endpoints{Invoke: host + spec.InvokePrefix + e.Name, MCP: host + spec.MCPPath}
	}
	return table(f.crm.tableTools(), f.weather.tableTools(), extra)
}

func ptr[T any](v T) *T { return &v }

// TestCatalogInABrowser searches the catalog as a person would, in a real
// headless Chromium: it types a task into the search box, submits it,
// follows the best result to the tool's page, and checks that the page's
// stylesheet applies under its Content-Security-Policy and that nothing
// was blocked or thrown.
func TestCatalogInABrowser(t *testing.T) {
	ctx := browser(t)
	f := newSearchFixture(t, gateway.Options{})
	if err := f.g.SetTable(catalogTable(f)); err != nil {
		t.Fatal(err)
	}

	// Console subscribes when it returns: every message of the page from
	// here on is read, CSP violations (browser log errors) included.
	var (
		mu       sync.Mutex
		problems []string
	)
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || strings.Contains(m.Text, "Content Security Policy") {
				mu.Lock()
				problems = append(problems, m.Text)
				mu.Unlock()
			}
		}
	}()

	run := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	png := func() []byte {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		return b
	}

	// chromedp's node queries follow the document of the last Navigate; a
	// page reached by a submit or a click is waited for and read through
	// the DevTools instead. Runtime.evaluate is the DevTools', not the
	// page's: the CSP does not apply to it, and it reads what the page's
	// stylesheet made.
	waitFor := func(what, want string) []string {
		t.Helper()
		const read = `[location.pathname + location.search, document.readyState,
			(document.querySelector('tbody tr td a') || {}).innerText || '',
			(document.querySelector('h1') || {}).innerText || '',
			(document.querySelector('main') || {}).innerText || '',
			getComputedStyle(document.querySelector('header')).backgroundColor]`
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			page, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](read))
			if err == nil && len(page) == 6 && page[0] == want && page[1] == "complete" {
				return page
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the browser is at %v (%v), want %s", what, page, err, want)
			}
		}
	}

	run("opening the catalog", chromedp.Navigate(f.url+"/catalog"))
	run("waiting for the search box", chromedp.WaitVisible(`input[name=q]`))
	run("typing a task", chromedp.SendKeys(`input[name=q]`, "weather forecast for a city"))
	run("submitting", chromedp.Click(`button[type=submit]`))
	results := waitFor("the search box's submit", "/catalog?q=weather+forecast+for+a+city")
	first, headerBG := results[2], results[5]
	shot := png()
	// Load the results page as chromedp's own document, and click the
	// best result with the mouse.
	run("reloading the results", chromedp.Navigate(f.url+results[0]))
	run("following the best result", chromedp.Click(`tbody tr:first-child td:first-child a`))
	tool := waitFor("the best result's link", "/catalog/tool?name=weather_forecast")
	h1, params := tool[3], tool[4]
	toolShot := png()

	if first != "weather_forecast" {
		t.Errorf("the best result is %q, want weather_forecast", first)
	}
	if headerBG != "rgb(22, 33, 58)" {
		t.Errorf("the header's background is %q: the stylesheet did not apply under the CSP", headerBG)
	}
	if !strings.HasPrefix(h1, "weather_forecast") {
		t.Errorf("the tool page's heading is %q", h1)
	}
	for _, want := range []string{"weather/weather-tools", "The city, in any language", "maximum 7", "Input schema"} {
		if !strings.Contains(params, want) {
			t.Errorf("the tool page lacks %q", want)
		}
	}
	chromedp.Cancel(ctx) //nolint:errcheck // ends the browser, and so the console
	<-done
	mu.Lock()
	if len(problems) > 0 {
		t.Errorf("the browser reported: %q", problems)
	}
	mu.Unlock()

	dir := t.TempDir()
	if *updateScreenshots {
		dir = filepath.Join("..", "..", "docs")
	}
	for name, b := range map[string][]byte{"catalog-search.png": shot, "catalog-tool.png": toolShot} {
		if len(b) == 0 {
			t.Errorf("no screenshot %s", name)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
