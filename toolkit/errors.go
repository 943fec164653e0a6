package toolkit

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Errors returned by this package wrap one of them, so test
// with errors.Is.
var (
	// ErrToolNotFound is returned by [Registry.Call] for an unknown tool.
	ErrToolNotFound = errors.New("toolkit: tool not found")
	// ErrDuplicateTool is returned by [Registry.Add] for a name that is
	// already registered, or given twice.
	ErrDuplicateTool = errors.New("toolkit: duplicate tool name")
	// ErrInvalidName is returned for a tool name outside
	// ^[A-Za-z0-9_.-]{1,128}$.
	ErrInvalidName = errors.New("toolkit: invalid tool name")
	// ErrInvalidSchema is returned when declaring a tool whose input or
	// output cannot be described or bound: an unsupported Go type, a bad
	// struct tag, a default that breaks its own constraints, or a JSON
	// Schema that does not compile.
	ErrInvalidSchema = errors.New("toolkit: invalid schema")
	// ErrInvalidArguments is matched by every [*ArgumentError].
	ErrInvalidArguments = errors.New("toolkit: invalid arguments")
	// ErrPanic is matched by the error a recovered panic becomes.
	ErrPanic = errors.New("toolkit: tool panicked")
	// ErrPermissionDenied is matched by the errors of [RequireScopes].
	ErrPermissionDenied = errors.New("toolkit: permission denied")
	// ErrInvalidOption is matched by the error of a tool declared with an
	// option value out of range, such as a negative [Timeout], and by the
	// panic of a middleware constructor given one.
	ErrInvalidOption = errors.New("toolkit: invalid option")
	// ErrBusy is matched when a concurrency limit could not be acquired
	// before the call's context ended.
	ErrBusy = errors.New("toolkit: tool busy")
)

// ArgumentError reports arguments that could not be bound: every problem
// found, not only the first. Its message is written for the model that sent
// the arguments, so that it can correct them in one step.
//
// An ArgumentError is distinct from an execution error: it means the tool's
// function was never called.
type ArgumentError struct {
	// Tool is the name of the tool that was called.
	Tool string
	// Problems lists each problem, sorted by path, so that the same
	// mistakes always read the same.
	Problems []Problem
}

// Problem is one thing wrong with the arguments.
type Problem struct {
	// Path is the JSON path of the offending value, such as
	// "$.customer.tags[2]"; "$" is the arguments object itself.
	Path string
	// Expected says what would have been accepted.
	Expected string
	// Received describes what was sent, as JSON cut to a bounded length,
	// or "nothing" for a missing value.
	Received string
	// Valid lists the valid argument names at Path's parent, for an
	// unknown argument.
	Valid []string
}

// Bounds on an error's text, so that what the model reads never grows with
// what it sent.
const (
	// maxListedProblems is how many problems an ArgumentError lists.
	maxListedProblems = 20
	// maxProblemText bounds each part of a problem: its path, what was
	// expected and what was received.
	maxProblemText = 256
	// maxListedNames is how many valid names a problem lists.
	maxListedNames = 40
	// maxErrorText bounds the text of an error result.
	maxErrorText = 8 << 10
)

// Error lists the problems, one per line: the first 20, and how many more
// there are.
func (e *ArgumentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid arguments for tool %q:", e.Tool)
	for i, p := range e.Problems {
		if i == maxListedProblems {
			fmt.Fprintf(&b, "\n- … and %d more problems", len(e.Problems)-i)
			break
		}
		b.WriteString("\n- ")
		b.WriteString(p.String())
	}
	return b.String()
}

// cut bounds s to n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Is reports whether target is [ErrInvalidArguments].
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArguments }

// String renders the problem as "path: expected …, received …".
// Each part is cut to a bounded length, and at most 40 valid names are
// listed.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(cut(p.Path, maxProblemText))
	b.WriteString(": expected ")
	b.WriteString(cut(p.Expected, maxProblemText))
	if p.Received != "" {
		b.WriteString(", received ")
		b.WriteString(cut(p.Received, maxProblemText))
	}
	if len(p.Valid) > 0 {
		b.WriteString("; valid names are ")
		valid := p.Valid
		if len(valid) > maxListedNames {
			valid = valid[:maxListedNames]
		}
		b.WriteString(cut(strings.Join(valid, ", "), maxProblemText*4))
		if len(p.Valid) > maxListedNames {
			fmt.Fprintf(&b, " and %d more", len(p.Valid)-maxListedNames)
		}
	}
	return b.String()
}

// PanicError is the error a panic in a tool or in middleware becomes. The model sees only that the tool failed; the panic
// value and stack are logged, since they may hold internals.
type PanicError struct {
	Tool  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %q failed unexpectedly (internal error)", e.Tool)
}

// Is reports whether target is [ErrPanic].
func (e *PanicError) Is(target error) bool { return target == ErrPanic }
