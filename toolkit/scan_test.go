package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

type orderService struct{ prefix string }

type orderQuery struct {
	ID int64 `json:"id"`
}

type order struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
}

func (s *orderService) GetOrder(_ context.Context, q orderQuery) (order, error) {
	return order{ID: q.ID, Status: s.prefix + "shipped"}, nil
}

func (s *orderService) CancelOrder(_ context.Context, q orderQuery) error {
	if q.ID == 0 {
		return errors.New("no order 0")
	}
	return nil
}

func (s *orderService) GetHTTPStatus(_ context.Context, _ struct{}) (string, error) { return "ok", nil }

func (s *orderService) DeleteEverything(context.Context, struct{}) error { return nil }

func (s *orderService) WrongShape(q orderQuery) error { return nil }

func TestScan(t *testing.T) {
	svc := &orderService{prefix: "is "}
	tools, err := Scan(svc,
		Method{Name: "GetOrder", Description: "Looks an order up.", Options: []Option{ReadOnly()}},
		Method{Name: "CancelOrder", Description: "Cancels an order."},
		Method{Name: "GetHTTPStatus", Description: "Says how the service is."},
	)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name())
	}
	if got := fmtList(names); got != "get_order cancel_order get_http_status" {
		t.Errorf("names = %s", got)
	}
	r := &Registry{}
	if err := r.Add(tools...); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("delete_everything"); ok {
		t.Error("a method outside the allow-list became a tool")
	}
	ctx := context.Background()
	res, _ := r.Call(ctx, "get_order", json.RawMessage(`{"id":"9007199254740993"}`))
	if string(res.StructuredContent) != `{"id":9007199254740993,"status":"is shipped"}` {
		t.Errorf("get_order = %s", res.StructuredContent)
	}
	if tools[0].Spec().Annotations == nil || !*tools[0].Spec().Annotations.ReadOnlyHint {
		t.Error("options of a scanned method were lost")
	}
	if res, _ := r.Call(ctx, "cancel_order", json.RawMessage(`{"id":1}`)); res.Text() != "Success" {
		t.Errorf("cancel_order = %s", res.Text())
	}
	if res, _ := r.Call(ctx, "cancel_order", json.RawMessage(`{"id":0}`)); !res.IsError || res.Text() != "no order 0" {
		t.Errorf("cancel_order error = %+v", res)
	}
	if res, _ := r.Call(ctx, "cancel_order", json.RawMessage(`{"id":0.5}`)); !res.IsError {
		t.Errorf("bad arguments were bound: %+v", res)
	}
}

func TestScanRefusals(t *testing.T) {
	svc := &orderService{}
	tests := []struct {
		name   string
		method Method
		want   error
	}{
		{"missing method", Method{Name: "Nope"}, ErrInvalidSchema},
		{"unexported method", Method{Name: "getOrder"}, ErrInvalidSchema},
		{"wrong signature", Method{Name: "WrongShape"}, ErrInvalidSchema},
		{"bad tool name", Method{Name: "GetOrder", ToolName: "get order"}, ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Scan(svc, tt.method); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := Scan(nil, Method{Name: "GetOrder"}); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("nil service: err = %v", err)
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"GetOrder":      "get_order",
		"GetHTTPStatus": "get_http_status",
		"ID":            "id",
		"OrderV2":       "order_v2",
		"HTMLToText":    "html_to_text",
		"already_snake": "already_snake",
		"A":             "a",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func fmtList(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
