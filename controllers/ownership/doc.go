// Package ownership holds the rule that decides which ToolSet owns each
// published tool name (DESIGN §4), and the decision state the table
// publisher keeps around it (the index, the restore window, the compressed
// ceiling). It is a pure function of its inputs, with no API server and no
// clock: the table publisher gathers the claims, the current owners and the
// policies, asks the rule, and writes the outcome.
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
//   - A denied owner is not an owner. The cluster's budgets (tools per
//     namespace, the table's JSON bytes and its compressed bytes, see
//     [Budget.Apply]) are inside the rule: an owner the budget denies loses
//     the name, which passes to the next permitted claimant, and the budget
//     weighs that one in turn. A claim that lost a name this way is
//     Conflicted; a name no claimant may publish for the budget is owned by
//     nobody, and its claimants are Denied (OverBudget). What an owner
//     already publishes is denied only after every newcomer.
//
// The outcome depends only on the inputs, never on the order claims arrive
// in or are listed in.
//
// # The ledger
//
// [Decide] is the whole rule as one pure function: the [Ledger] before,
// every [Claim] now, the policies, the budget and the hold in; the ledger
// after, every claimant's [Verdict] and the entries to publish out. The
// ledger records, for every owned name, its owner (namespace, name and
// UID), since when and why ([Claimed], [HandedOver], [Restored]), and it
// is exactly what the next table holds: a verdict Owned is final, never
// turned Denied when the table is written. Deciding again from its own
// outcome changes nothing, so a re-offer never moves a name or rewrites a
// status. An owner deleted and created again under its name (another UID)
// lets go first, and the new object claims as any newcomer. [Restore]
// rebuilds the ledger from a table read back at start, by the rule
// wherever the table names a name twice.
//
// # The index
//
// [Index] keeps the ledger incrementally, as the table publisher needs it:
// [Index.Offer], [Index.Release], [Index.SetRule] and [Index.Settle] apply
// the rule name by name as claims change, and [Index.Rebudget] decides
// again as Decide does from the ledger before the change while the budget
// may bind, unless nothing Decide weighs changed since its last decision
// (a re-offer of the same names and sizes): incrementally, re-weighing
// only the namespaces a change touches and the entries the budget's cut
// passes over, unless a compressed ceiling is set, hand-overs are held or
// a name the budget denies has another claimant, when it runs Decide. It holds no client and no lock and does no I/O: the publisher
// serialises the calls, and [Index.Drain] says what the outcome asks of
// it (a table to write, ToolSets to tell). Its property test checks that
// it is Decide from scratch at every step. The durable record is the
// table itself, whose entries name their owners, with every record's
// owner UID, since and why stored in the ledger's chunks beside it (see
// spec.TableLedgerChunkKey), so that [Restore] keeps them. The table readers
// see lags the ledger by the publisher's debounce: a verdict Owned is
// shown Published only once the table has the name.
//
// # The restore window
//
// [Window] is what a start or a failover holds while the table read back
// is the ledger and not every ToolSet has spoken: [Window.Open] on the
// ToolSets that exist, [Window.Heard] as each offers, retains or
// withdraws (the last one closes it), [Window.Close] when its bound has
// passed. While it is [Window.Restoring] it is the Index's Hold, and
// [Window.HoldsWrites] says whether the table, unreadable at start, must
// not be written yet. The publisher times the bound, drops the restored
// entries of [Window.Unheard] at it, and settles the names that waited.
// [Tighten] and [Relax] step the compressed ceiling (Budget.MaxEncodedBytes)
// the publisher learns from tables that did not fit. Like the rest, they
// hold no client, no lock and no clock of their own.
package ownership
