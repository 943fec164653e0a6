// Package toolkit turns ordinary Go functions into tools that a model can
// call, and calls them with the arguments a model actually sends.
//
// # Declaring tools
//
// There are three ways to declare a tool, and all of them end in the same
// [*Tool]:
//
//   - [New] and [NewAction] take a typed function
//     func(context.Context, In) (Out, error). The input schema is generated
//     from In, the output schema from Out.
//   - [Scan] turns an allow-list of a service value's methods into tools
//     named in snake_case.
//   - [NewDynamic] takes a JSON Schema (written by hand or built with
//     [Params]) and a func(context.Context, map[string]any) (any, error),
//     for tools that come from configuration or plugins.
//
// # Struct tags
//
// The schema generated for a Go type agrees with encoding/json on every type,
// as it reads an input and as it writes an output (a type with only
// MarshalJSON is read by its kind; one with only UnmarshalText is read from
// a string; a field behind a nil embedded pointer may be missing from an
// output; a result type that is a pointer declares no output schema, since
// null is no structured result):
// field names, omitempty, "-", the string option, embedded structs,
// pointers, slices, maps, time.Time (a date-time string), []byte (a base64
// string), json.RawMessage and any, integer widths and recursive types
// (through $defs). On top of the json tag, four tags shape a field's
// schema. Each free-text tag has a tag of its own, so that commas and
// semicolons in it need no escaping:
//
//	type Input struct {
//		City  string   `json:"city" description:"City name, e.g. Paris, France"`
//		Units string   `json:"units,omitempty" tool:"enum=metric|imperial" default:"metric"`
//		Days  int      `json:"days,omitempty" tool:"minimum=1;maximum=14" default:"3"`
//		Code  string   `json:"code" pattern:"^[A-Z]{2,3}$"`
//		Tags  []string `json:"tags,omitempty" tool:"maxItems=5;maxLength=20"`
//	}
//
// The tags are:
//
//   - description: free text (the go-sdk's jsonschema tag is read too).
//   - pattern: a regular expression that the string must match.
//   - default: the value a missing field takes, as plain text for a
//     string and as JSON for anything else.
//   - tool: constraints, separated by semicolons: required, optional,
//     enum=a|b|c, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
//     minLength, maxLength, minItems, maxItems, uniqueItems, format, title,
//     sensitive, nullAsMissing. A backslash escapes a semicolon or a bar.
//
// A sensitive field (a password, a token) is served with writeOnly: true,
// and its value never appears in [Logging]'s lines at any level, in the
// spans and metrics of the tracing and metrics subpackages, or in an error
// message, the model's included (a wrong type for that very field says
// "received [redacted]"; a missing one says "received nothing"). It is
// shown as "[redacted]", and is scrubbed from an error, a logged result,
// or a progress or log message of the tool that quotes it: wherever it
// occurs, or, for a value shorter than four bytes, where no letter or
// digit touches it, so that a one-letter value leaves "expected" alone. A dynamic tool marks one
// with [Sensitive], or with "writeOnly": true (or "x-sensitive": true) in
// its schema. Middleware of your own logs [Request.RedactedArguments] and
// passes texts through [Request.Redact].
//
// A field is required unless it is a pointer, has omitempty or omitzero, has
// a default, or is marked optional (see "Null, missing and defaults"). On a slice or array field, the value
// constraints (enum, minimum, pattern, format, …) apply to its items.
//
// # Binding arguments
//
// [Registry.Call] binds the raw JSON arguments leniently where a model's
// mistake can be repaired without loss, exactly where precision matters, and
// strictly otherwise:
//
//   - Repaired, in the text: a Markdown code fence around the JSON
//     (```json … ```), trailing commas and comments, Python's True, False
//     and None, single-quoted strings (where the text then parses: an
//     apostrophe inside one is refused, not guessed), a UTF-8 byte order
//     mark before it, and an argument object sent as a JSON string.
//   - Repaired, in the values: arrays and objects double-encoded as
//     strings, numbers sent as strings (with space around them), integral
//     floats such as 5.0 for integers, "true" and "false" for booleans,
//     enum values in the wrong letter case or with space around them
//     (returned in their declared spelling), a single value where an array
//     of that value's type is expected (it becomes a one-element array;
//     "8" counts as a number there, as it would inside the array),
//     argument names in the wrong letter case (in objects that refuse
//     unknown names, as structs do), a lone "arguments", "input" or
//     "parameters" wrapper around an object whose names are all the
//     tool's (when the tool has no argument of that name), and a
//     date-time with a lower-case t or z, or a leap second (23:59:60,
//     read as the next second, since time.Time has none). Null and
//     missing arguments follow the table below.
//   - Exact: integers are parsed from their text over the full int64 and
//     uint64 ranges and never pass through float64. Values of type any
//     carry numbers as json.Number for the same reason.
//   - Refused, since any repair would guess: a name given twice in one
//     object (parsers disagree on which one counts), numbers with
//     thousands separators ("15,000" is 15000 in one locale and 15 in
//     another), NaN and Infinity (bare or as strings), text after the
//     arguments object, a date alone for a date-time, nesting deeper than
//     [MaxArgumentDepth] levels, and arguments larger than
//     [MaxArgumentBytes], which [Registry.Call] refuses before parsing.
//   - Refused as well: a non-integral value for an integer, a value out of
//     range for its Go type or its schema, any other string for a boolean,
//     an enum value not in the list, a missing required argument at any
//     depth, names of a map with integer (or text) keys that are one key
//     ("1" and "01"), and an unknown argument name (the error names the
//     valid ones, and the one most likely meant).
//
// After repair the arguments are validated against the tool's JSON Schema
// (2020-12), compiled once when the tool is declared. A typed tool whose
// schema holds only what its decoder checks itself (types, required and
// unknown names, string enums and patterns, integer bounds, lengths, item
// counts and scalar defaults) reads well-formed arguments that need no repair
// straight into its Go value, with no generic tree and no generic
// validation; anything else, or anything unusual, takes the full path, so
// the outcome is the same either way. Every problem is
// reported at once in an [*ArgumentError], with its JSON path, what was
// expected and what was received, and no Go type names. Its text is
// bounded whatever was sent: at most 20 problems are listed, each part cut
// to a few hundred bytes; an error result's text is cut to 8 KiB.
//
// # Null, missing and defaults
//
// A field's Go type says whether it may be null, and its tags whether it
// may be left out; the input schema says both, and binding holds to it:
//
//	field                                   missing           null
//	--------------------------------------  ----------------  ------------------
//	value (string, int, bool, struct, …)    refused           refused
//	value with omitempty, omitzero, a       zero value, or    refused
//	  default or tool:"optional"              the default
//	pointer                                 nil, or default   nil
//	slice, map or any with omitempty        nil, or default   nil
//	slice, map or any without omitempty     refused           nil
//	slice with minItems ≥ 1                 as above          refused
//	any of these with tool:"nullAsMissing"  as above          as if missing
//
// So a required field must be present, null is accepted only where the
// schema lists it, and a default applies to a field left out, never to an
// explicit null (a *string with a default is nil for null, the default
// when missing), unless the field says tool:"nullAsMissing". A struct
// value left out is made when its members have defaults, so that they
// apply; a pointer left out stays nil. A time.Time reads a date-time, or
// a date alone (as midnight UTC) with tool:"format=date". A field that
// binding could never set, one promoted through an unexported embedded
// pointer, fails the declaration.
//
// # Results
//
// A string result is returned as text. No output, or an empty struct,
// becomes the text "Success". Anything else becomes its JSON as text, plus
// structuredContent when it is a JSON object. Wherever an output schema is
// declared (a struct or a map result), structuredContent conforms to it,
// as MCP requires: the result is encoded as an addressable value, so that
// MarshalText or MarshalJSON with a pointer receiver counts as the schema
// says (a map's values are not addressable, and their schema says so
// too); a nil map is the empty object; and a result whose tags constrain
// it (an enum, a pattern, a bound) is checked against its schema, and one
// that breaks it is an error result, logged, not structured content that
// lies. An error becomes a result with
// isError set and the error's message, so that the model can correct itself,
// unless [Registry.PropagateErrors] is set. A panic in a tool or in any
// middleware is recovered into an error result and logged, always: the MCP
// SDK runs handlers without a recover, so a panic that escaped would end
// the process.
//
// A tool that returns a *spec.CallResult builds its own result: any number
// of blocks of text ([Text]), images ([Image]), audio ([Audio]) and
// embedded resources ([Resource]), which every transport passes on as they
// are.
//
// # Progress and log messages
//
// A long-running tool reports its progress with [Progress] and sends log
// messages to its caller with [Log], both through its context. Over MCP
// they become notifications/progress, when the client sent a
// progressToken, and notifications/message, at or above the level the
// client set; on other transports they are dropped, at the cost of a
// context lookup. A transport of one's own provides a [Reporter].
//
// # Tasks
//
// A tool that takes long can let its MCP caller run it as a task (MCP
// 2025-11-25) with [TaskSupport]: the caller gets a task at once, polls
// it, reads the result when it is done, or cancels it. The handler is the
// ordinary one: it runs in the background, its [Progress] messages become
// the task's status message, and cancellation ends its context, so a tool
// that honours its context and reports its progress needs nothing more:
//
//	toolkit.New("build_report", "Write a long report.", buildReport,
//		toolkit.TaskSupport(spec.TaskSupportOptional), toolkit.Timeout(10*time.Minute))
//
// The server package's Handler serves the tasks, bounded per caller.
//
// # Asking the user
//
// A tool asks the user of the client that called it a question with
// [Ask]: a message, and the form of the answer as a JSON Schema of
// primitive properties. Over MCP it is elicitation: a client of the 2025
// era is asked during the call, and Ask returns the answer; in the
// 2026-07-28 era Ask returns [ErrInputRequired] the first time, the tool
// returns it, the call's result is the question (input_required), and the
// client's next call, with the answer, runs the tool again from the start,
// Ask now returning the answer. So a tool asks before it does anything
// that must not be done twice, and gives each question an id of its own.
// Where no one can be asked (another transport, a client that cannot
// answer) Ask returns [ErrCannotAsk]. A transport of one's own provides an
// [Asker]. The sensitive values of the call are redacted from the
// question, as from progress messages. Declare a tool that asks with
// [Asks]: the toolplane gateway calls only such tools where they can ask.
//
// # Middleware
//
// A [Middleware] wraps a [CallHandler], and so every call on every
// transport, since every transport calls [Registry.Call]. This package provides [Logging], [Recover],
// [CallTimeout], [ConcurrencyLimit], [RequireScopes] and [Authorize]. Every
// limit, of a middleware or of a tool ([Timeout], [MaxConcurrent]), means
// "no limit" at zero; a negative one is refused when it is built. The
// subpackages tracing and metrics provide OpenTelemetry spans and Prometheus
// metrics, so that a service pulls those dependencies in only when it uses
// them.
package toolkit
