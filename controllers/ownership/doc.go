// Package ownership holds the rule that decides which ToolSet owns each
// published tool name (DESIGN §4). It is a pure function of its inputs, with
// no API server and no clock: the table publisher gathers the claims, the
// current owners and the policies, asks the rule, and writes the outcome.
//
// # The rule
//
// A name is owned by at most one ToolSet.
//
//   - Policy comes first. A name that some [Policy] matches may be owned only
//     by a ToolSet in a namespace that a matching policy lists. A claimant
//     elsewhere is [Denied], with the policy named, whatever the claim order.
//     A claim may also arrive already denied (see [Claimant.Denied]): the hook
//     for ceilings decided before the rule runs, such as budgets.
//   - The owner keeps a name for as long as it still claims it and is
//     permitted to.
//   - When the owner lets go (or loses the right), the earliest-created
//     remaining permitted claimant takes the name, ties broken by namespace,
//     then name. Every other permitted claimant is [Conflicted], with the owner
//     named.
//   - While the caller holds hand-overs ([Contest.Hold], after a restart until
//     every ToolSet has spoken), a name without an owner stays unowned and its
//     permitted claimants are [Pending].
//   - A denied owner is not an owner. [Budget.Apply] decides which owned
//     names the cluster's budgets deny (tools per namespace, the table's
//     JSON bytes and its compressed bytes); the publisher resolves each such
//     name again with the owner's claim [Claimant.Denied], so that it passes
//     to the next permitted claimant, which the budget then weighs in turn.
//
// The outcome depends only on the inputs, never on the order claims arrive
// in or are listed in.
package ownership
