package v1alpha1

// Condition types of a ToolSet.
const (
	// ConditionReady summarises the ToolSet: True when its tools are scraped
	// and published.
	ConditionReady = "Ready"
	// ConditionDegraded is True when part of the ToolSet could not be
	// published: invalid tools, failing Pods, replicas that disagree.
	ConditionDegraded = "Degraded"
	// ConditionStale is True while the last good tools are held through a
	// scrape outage.
	ConditionStale = "Stale"
	// ConditionConflicted is True when this ToolSet does not own some of the
	// names it exposes: another ToolSet owns them, a policy denies them, or
	// they wait for a hand-over after a restart.
	ConditionConflicted = "Conflicted"
	// ConditionClamped is True when the ToolSet asks for more than the
	// admin ceilings (manager flags) allow, and gets the ceiling instead.
	ConditionClamped = "Clamped"
)

// The condition pair that kstatus (and so kubectl wait, Flux and Argo CD
// health checks) reads of any resource. Their reasons are those of the
// condition they summarise; ReasonHealthy when False.
const (
	// ConditionReconciling is True while the operator keeps working towards
	// what the spec asks for and progress needs no change by the user: no
	// Pod is ready yet, no Pod could be scraped (retried every interval),
	// a Secret or ConfigMap the spec names (or its key) does not exist yet,
	// tools are held through an outage, replicas disagree during a rollout,
	// or names wait for a hand-over after a restart.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when no retry can make progress until the
	// user changes something: the spec cannot be acted on, no tool is
	// valid, or spec.service names a Service that is refused
	// (ServiceRefused).
	ConditionStalled = "Stalled"
)

// Condition reasons of a ToolSet.
const (
	// ReasonPublished: every selected Pod was scraped and the tools are published.
	ReasonPublished = "Published"
	// ReasonNoPods: the selector matches no Running and Ready Pod.
	ReasonNoPods = "NoPods"
	// ReasonScrapeFailed: no selected Pod could be scraped.
	ReasonScrapeFailed = "ScrapeFailed"
	// ReasonPartialScrape: some selected Pods could not be scraped.
	ReasonPartialScrape = "PartialScrape"
	// ReasonInvalidTools: some tools break a rule or a limit.
	ReasonInvalidTools = "InvalidTools"
	// ReasonRolloutSkew: ready replicas serve different tool lists.
	ReasonRolloutSkew = "RolloutSkew"
	// ReasonToolsStale: the last good tools are held through a scrape outage.
	ReasonToolsStale = "ToolsStale"
	// ReasonToolsDropped: the grace period ended and the held tools were dropped.
	ReasonToolsDropped = "ToolsDropped"
	// ReasonNameConflict: another ToolSet owns some of the names.
	ReasonNameConflict = "NameConflict"
	// ReasonNameDenied: a ToolNamePolicy or an admin ceiling denies some of
	// the names, and no other ToolSet owns the rest.
	ReasonNameDenied = "NameDenied"
	// ReasonHandOverPending: some names wait, after a restart, for every
	// ToolSet to be heard from before they are handed over.
	ReasonHandOverPending = "HandOverPending"
	// ReasonAwaitingWrite: the ToolSet owns some names that the tool table
	// readers see does not have yet; they are published at its next write
	// (within the publisher's debounce, or once a failing write succeeds).
	// Tools in state Pending carry it as their reason, and Reconciling
	// says so.
	ReasonAwaitingWrite = "AwaitingWrite"
	// ReasonNoConflict: this ToolSet owns every name it exposes.
	ReasonNoConflict = "NoConflict"
	// ReasonNoService: spec.service is not set, so the published tools have
	// no endpoint for agents.
	ReasonNoService = "NoService"
	// ReasonInvalidSpec: the spec cannot be acted on, such as an unusable
	// selector, an empty bearer token or a CA bundle without a certificate.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotFound: a Secret that spec.authorization or spec.tls.ca
	// names does not exist in the ToolSet's namespace. No Pod is scraped
	// until it does, and the operator looks for it again every 5s (or
	// --min-interval), whatever spec.interval says. The message names the
	// field and the Secret, never a value.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretKeyNotFound: the Secret exists but lacks the key named;
	// looked for again as for SecretNotFound.
	ReasonSecretKeyNotFound = "SecretKeyNotFound"
	// ReasonConfigMapNotFound: the ConfigMap spec.tls.ca names does not
	// exist in the ToolSet's namespace; looked for again as for
	// SecretNotFound.
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	// ReasonConfigMapKeyNotFound: the ConfigMap exists but lacks the key
	// named.
	ReasonConfigMapKeyNotFound = "ConfigMapKeyNotFound"
	// ReasonServiceRefused: spec.service names a Service whose DNS name may
	// lead outside the ToolSet's namespace, one of type ExternalName or one
	// without a selector, so the tools are published without endpoints:
	// no agent or gateway calls them until the Service selects the
	// namespace's Pods.
	ReasonServiceRefused = "ServiceRefused"
	// ReasonHealthy: nothing is degraded or stale.
	ReasonHealthy = "Healthy"
	// ReasonCeilingApplied: some of the spec is beyond an admin ceiling, and
	// the ceiling applies instead; the message says which.
	ReasonCeilingApplied = "CeilingApplied"
	// ReasonWithinCeilings: the spec asks for nothing beyond the ceilings.
	ReasonWithinCeilings = "WithinCeilings"
)

// Condition reasons of a ToolNamePolicy.
const (
	// ReasonPolicyInForce: the policy is in force: every name it matches is
	// owned only in its namespaces.
	ReasonPolicyInForce = "InForce"
)
