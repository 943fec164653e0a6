package contract_test

import (
	"encoding/json"
	"fmt"

	"github.com/toolplane/toolplane/toolkit/spec/contract"
)

func ExampleCompare() {
	old := contract.Version{InputSchema: json.RawMessage(`{
		"type": "object",
		"properties": {"id": {"type": "string"}, "reason": {"type": "string", "enum": ["damaged", "late", "other"]}},
		"required": ["id"]}`)}
	new := contract.Version{InputSchema: json.RawMessage(`{
		"type": "object",
		"properties": {"id": {"type": "string"}, "reason": {"type": "string", "enum": ["damaged", "late"]}, "amount": {"type": "number"}},
		"required": ["id", "amount"]}`)}
	changes := contract.Compare(old, new)
	for _, c := range changes {
		fmt.Println(c)
	}
	fmt.Println("breaking:", len(contract.Breaking(changes)) > 0)
	// Output:
	// breaking: inputSchema.properties.amount: property "amount" was added and is required
	// breaking: inputSchema.properties.reason: enum values removed: "other"
	// breaking: true
}
