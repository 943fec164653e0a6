package toolkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolplane/toolplane/toolkit"
	"github.com/toolplane/toolplane/toolkit/spec"
)

type ExportInput struct {
	Rows int `json:"rows" tool:"minimum=1"`
}

type ExportOutput struct {
	Rows int `json:"rows"`
}

// A long-running tool that an MCP client may call as a task: the handler
// is an ordinary one that honours its context and reports its progress.
// The tool is served with MCP's execution.taskSupport.
func ExampleTaskSupport() {
	export, err := toolkit.New("export_rows", "Exports rows, slowly.",
		func(ctx context.Context, in ExportInput) (ExportOutput, error) {
			for i := 1; i <= in.Rows; i++ {
				if err := ctx.Err(); err != nil {
					return ExportOutput{}, err // tasks/cancel ends the context
				}
				toolkit.Progress(ctx, float64(i), float64(in.Rows), "exported a row") // the task's statusMessage
			}
			return ExportOutput(in), nil
		},
		toolkit.TaskSupport(spec.TaskSupportOptional), toolkit.Timeout(10*time.Minute))
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(export.Spec().Execution)
	fmt.Println(string(b))

	_, err = toolkit.New("bad", "", func(context.Context, ExportInput) (ExportOutput, error) { return ExportOutput{}, nil },
		toolkit.TaskSupport("sometimes"))
	fmt.Println(err != nil)
	// Output:
	// {"taskSupport":"optional"}
	// true
}
