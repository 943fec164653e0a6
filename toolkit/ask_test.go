package toolkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/toolkit"
)

// recordingAsker answers every question with accept, or asks for the
// next round, and records the questions.
type recordingAsker struct {
	later bool
	asked []toolkit.Question
}

func (a *recordingAsker) Ask(_ context.Context, _ string, q toolkit.Question) (toolkit.Answer, error) {
	a.asked = append(a.asked, q)
	if a.later {
		return toolkit.Answer{}, toolkit.ErrInputRequired
	}
	return toolkit.Answer{Action: "accept", Content: map[string]any{"ok": true}}, nil
}

type askLoginIn struct {
	User     string `json:"user"`
	Password string `json:"password" tool:"sensitive"`
}

// TestAskThroughTheRegistry: Ask reaches the transport's Asker with the
// call's sensitive values redacted from the question; without one it is
// ErrCannotAsk; a tool's ErrInputRequired reaches a transport that asks,
// and is an isError result for one that does not.
func TestAskThroughTheRegistry(t *testing.T) {
	reg := new(toolkit.Registry)
	if err := reg.Add(toolkit.MustNew("login", "Log in", func(ctx context.Context, in askLoginIn) (string, error) {
		ans, err := toolkit.Ask(ctx, "confirm", toolkit.Question{Message: "Log in as " + in.User + " with " + in.Password + "?"})
		if err != nil {
			return "", err
		}
		return ans.Action, nil
	})); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"user":"ada","password":"hunter2"}`)

	a := &recordingAsker{}
	res, err := reg.Call(toolkit.WithAsker(context.Background(), a), "login", args)
	if err != nil || res.IsError || !strings.Contains(string(res.StructuredContent)+toolkitText(res), "accept") {
		t.Fatalf("%v %+v", err, res)
	}
	if len(a.asked) != 1 || strings.Contains(a.asked[0].Message, "hunter2") || !strings.Contains(a.asked[0].Message, "ada") {
		t.Errorf("asked %+v", a.asked)
	}

	later := &recordingAsker{later: true}
	if _, err := reg.Call(toolkit.WithAsker(context.Background(), later), "login", args); !errors.Is(err, toolkit.ErrInputRequired) {
		t.Errorf("a question for the next round: %v", err)
	}

	res, err = reg.Call(context.Background(), "login", args)
	if err != nil || !res.IsError || !strings.Contains(toolkitText(res), "cannot be asked") {
		t.Errorf("without an Asker: %v %+v", err, res)
	}
	// A tool that returns ErrInputRequired where nobody asks gets an
	// isError result, not an error only a transport that asks knows.
	if err := reg.Add(toolkit.MustNew("liar", "", func(context.Context, struct{}) (string, error) {
		return "", toolkit.ErrInputRequired
	})); err != nil {
		t.Fatal(err)
	}
	if res, err := reg.Call(context.Background(), "liar", nil); err != nil || !res.IsError {
		t.Errorf("ErrInputRequired without an Asker: %v %+v", err, res)
	}
}

func toolkitText(res interface{ Text() string }) string { return res.Text() }
