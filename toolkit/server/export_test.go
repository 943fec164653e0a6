package server

import (
	"context"

	"github.com/toolplane/toolplane/toolkit"
)

// VerifyKnownHeader and VerifyJOSE are the two paths of
// [TxnTokenVerifier.Verify], for the tests that compare them.
func VerifyKnownHeader(v *TxnTokenVerifier, raw string) (toolkit.Caller, error, bool) {
	return v.verifyKnownHeader(raw)
}

func VerifyJOSE(ctx context.Context, v *TxnTokenVerifier, raw string) (toolkit.Caller, error) {
	return v.verifyJOSE(ctx, raw)
}
