package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolplane/toolplane/internal/gateway"
)

// Second red-team pass on the redaction of a ToolSet's token. redactJSON
// decoded the backend's JSON into map[string]any, where a member written
// twice keeps only its last value, and, when its walk found no token
// there, passed the backend's bytes on as they came. It is now one pass
// over the bytes that redacts every string where it stands.

// postRPCBody is postRPC's exchange, its body as the client receives it.
func postRPCBody(t *testing.T, url, version, method, params string) string {
	t.Helper()
	resp := postRPCResponse(t, url, version, method, params)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Attack 1. createTask decodes the backend's reply into a struct whose
// Task is a map: encoding/json reuses a non-nil map for a repeated member,
// so two "task" members merge into one. redactJSON decodes the same bytes
// into map[string]any, where the last "task" replaces the first: the walk
// sees only the last, finds no token, and the reply counts as clean. The
// view shown to the client is the merged map, whose statusMessage (from
// the first "task") holds the token, decoded by every client.
func TestRedTeam2DuplicateTaskMemberCarriesTheTokenPastRedaction(t *testing.T) {
	const token = "tok-0f9e8d7c6b5a4321"
	first := `{"statusMessage":"authorized as Bearer ` + token + `"}`
	last := `{"taskId":"b-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		if isTaskCall(req) {
			return json.RawMessage(`{"task":` + first + `,"task":` + last + `}`), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{})
	id, created := createTaskID(t, endpoint)
	if b, leaked := shows(created, token, id); leaked {
		t.Errorf("task-augmented tools/call: the token reached the client: %s", b)
	}
}

// Attack 2. A member repeated deeper in the reply, first with the token,
// then without: redactJSON's walk sees the last, finds no token, and
// returns the backend's bytes untouched, so the answer the gateway writes
// holds the token as the backend wrote it. Decoders that keep the first of
// a repeated member (gjson, buger/jsonparser, simdjson's find_field; and
// System.Text.Json's JsonElement.EnumerateObject shows both) read the
// token; every proxy, log and trace of the answer holds it. The gateway's
// own check, "a value that holds not the token is passed as it is",
// does not hold: this value holds it. The same goes for a token the
// decoder cannot see as one: invalid UTF-8 in it, or a '"' that puts it
// across a member's end.
func TestRedTeam2DuplicateKeyKeepsTheTokenInTheAnswersBytes(t *testing.T) {
	const token = "tok-0f9e8d7c6b5a4321"
	task := `{"taskId":"b-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000,"_meta":{"x.example/auth":"Bearer ` + token + `","x.example/auth":"none"}}`
	result := `{"content":[{"type":"text","text":"Bearer ` + token + `","text":"ok"}]}`
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		switch {
		case isTaskCall(req):
			return json.RawMessage(`{"task":` + task + `}`), nil
		case req.Method == "tasks/get":
			return json.RawMessage(task), nil
		case req.Method == "tasks/result":
			return json.RawMessage(result), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{})
	id, _ := createTaskID(t, endpoint)
	for _, method := range []string{"tasks/get", "tasks/result"} {
		if b := postRPCBody(t, endpoint, "2025-11-25", method, `{"taskId":"`+id+`"}`); strings.Contains(b, token) {
			t.Errorf("%s: the answer's bytes hold the token: %s", method, b)
		}
	}
}

// Attack 3. A task answer that is withheld is shown as withheldTask,
// built from the backend's answer before redaction: its createdAt and
// lastUpdatedAt were kept when time.Parse read them as RFC 3339, and RFC
// 3339 parsing takes any number of fractional digits. A digit-only token
// there was shown, unredacted, in the withheld view. The answer is
// withheld here because the token is also written as a number, outside
// any string, where no redaction reaches it.
func TestRedTeam2WithheldTaskShowsTheBackendsTimestamp(t *testing.T) {
	const (
		token = "73920184421937550021"
		limit = 64 << 10
	)
	task := `{"taskId":"b-1","status":"working","attempt":` + token + `,"createdAt":"2026-01-01T00:00:00.` + token + `Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}`
	endpoint := redactRig(t, token, rawRequestHandler("tasker", func(req *jsonrpc.Request) (json.RawMessage, *jsonrpc.Error) {
		switch {
		case isTaskCall(req):
			return json.RawMessage(`{"task":` + task + `}`), nil
		case req.Method == "tasks/get":
			return json.RawMessage(task), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}
	}), gateway.Options{MaxResultBytes: limit})
	id, created := createTaskID(t, endpoint)
	view, _ := created["result"].(map[string]any)["task"].(map[string]any)
	if !strings.Contains(fmt.Sprint(view["statusMessage"]), "withheld") {
		t.Fatalf("the task was not withheld, the check proves nothing: %.300v", view)
	}
	if b, leaked := shows(created, token, id); leaked {
		t.Errorf("task-augmented tools/call withheld: the token reached the client: %s", b)
	}
	get := postRPC(t, endpoint, "2025-11-25", "tasks/get", `{"taskId":"`+id+`"}`)
	if b, leaked := shows(get, token, id); leaked {
		t.Errorf("tasks/get withheld: the token reached the client: %s", b)
	}
}
