package spec_test

import (
	"errors"
	"testing"

	"github.com/toolplane/toolplane/toolkit/spec"
)

func TestExecutionValidate(t *testing.T) {
	for _, e := range []*spec.Execution{nil, {}, {TaskSupport: "forbidden"}, {TaskSupport: "optional"}, {TaskSupport: "required"}} {
		if err := e.Validate(); err != nil {
			t.Errorf("%+v: %v", e, err)
		}
	}
	for _, ts := range []string{"Required", "always", " optional", "required\x00", "null"} {
		if err := (&spec.Execution{TaskSupport: ts}).Validate(); !errors.Is(err, spec.ErrTaskSupport) {
			t.Errorf("%q: got %v, want ErrTaskSupport", ts, err)
		}
	}
	if (&spec.Execution{TaskSupport: "forbidden"}).Tasks() || !(&spec.Execution{TaskSupport: "optional"}).Tasks() || (*spec.Execution)(nil).Tasks() {
		t.Error("Tasks")
	}
	if !(&spec.Execution{TaskSupport: "required"}).TasksRequired() || (&spec.Execution{TaskSupport: "optional"}).TasksRequired() {
		t.Error("TasksRequired")
	}
}
