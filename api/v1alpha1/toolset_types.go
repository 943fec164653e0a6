package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ToolSetSpec says which Pods serve tools and how the operator reads them.
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || !has(self.interval) || duration(self.timeout) <= duration(self.interval)",message="timeout must not exceed interval"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.scheme == 'https'",message="tls requires scheme https"
// +kubebuilder:validation:XValidation:rule="!has(self.authorization) || self.scheme == 'https'",message="authorization requires scheme https: a bearer token is never sent over plain http"
type ToolSetSpec struct {
	// selector selects the Pods that serve tools. Only Pods in the ToolSet's
	// own namespace are ever selected, and only those that are Running and
	// Ready are scraped. An empty selector ({}) selects every Pod in the
	// namespace; a selector that is left out is rejected. The API server
	// refuses an expression whose operator is not In, NotIn, Exists or
	// DoesNotExist, an In or NotIn without values and an Exists or
	// DoesNotExist with some; label keys and values that Kubernetes would
	// not accept make the ToolSet's Ready condition False with reason
	// InvalidSpec.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="selector operators must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="selector operators In and NotIn need values, and Exists and DoesNotExist take none"
	Selector metav1.LabelSelector `json:"selector"`

	// protocol is how the operator lists the Pods' tools. Toolkit (the
	// default) reads toolkit's spec document with a conditional GET. MCP
	// lists the tools of any MCP server, in any language, with tools/list
	// over Streamable HTTP (both protocol eras: stateless 2026-07-28
	// servers, and initialize, list and close for 2025 servers), following
	// its pages to the end within limits.maxTools. Both are held to the same
	// timeout, response size, redirect rule, token, TLS settings and
	// validation. Agents call the tools of an MCP ToolSet with tools/call at
	// its MCP endpoint; the tool table says so.
	// +optional
	// +kubebuilder:default=Toolkit
	Protocol Protocol `json:"protocol,omitempty"`

	// port is the container port that serves the spec endpoint (with
	// protocol MCP, the MCP endpoint), by name (as declared in the Pod's
	// containers[].ports[].name) or by number: a number from 1 to 65535, or
	// an IANA service name (1 to 15 lowercase letters, digits and dashes,
	// with at least one letter, neither starting nor ending with a dash nor
	// holding two in a row).
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : (size(self) <= 15 && self.matches('^[a-z0-9]([a-z0-9-]*[a-z0-9])?$') && self.matches('[a-z]') && !self.contains('--'))",message="port must be a number from 1 to 65535 or an IANA service name"
	Port intstr.IntOrString `json:"port"`

	// path is the HTTP path the tools are listed from on each Pod. Left
	// out, it depends on protocol: /.well-known/toolplane/tools, the spec
	// document, for Toolkit; /mcp for MCP. With protocol MCP it is also the
	// path of the MCP endpoint published in the tool table.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^?#\s]*$`
	Path string `json:"path,omitempty"`

	// scheme is the URL scheme used to scrape: http or https.
	// +optional
	// +kubebuilder:default=http
	// +kubebuilder:validation:Enum=http;https
	Scheme string `json:"scheme,omitempty"`

	// interval is how often every selected Pod is scraped. Pods that become
	// ready or change are scraped at once, whatever the interval. Each round
	// comes up to a tenth of the interval early, at random, so that ToolSets
	// created together do not scrape in lockstep. At least 5s, or the
	// operator's --min-interval if that is longer.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s')",message="interval must be at least 5s"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// timeout bounds one scrape of one Pod, connection and body included. It
	// must not exceed interval. The operator's ceiling (--max-timeout, 30s by
	// default) caps it, and the Clamped condition says so.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="timeout must be positive"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// tls configures how https scrapes verify the Pod's certificate. Only
	// allowed with scheme https.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`

	// authorization sends a bearer token with every scrape, and with every
	// call the toolplane gateway routes to the ToolSet (only over https:
	// with service.scheme http its calls are refused). The token is read
	// from a Secret in the ToolSet's namespace and never written to status,
	// events or logs. It requires scheme https: a token is never sent over
	// plain http, and a ToolSet that asks for one is refused. While the
	// Secret or its key is missing, no Pod is scraped, Ready says
	// SecretNotFound or SecretKeyNotFound, and the Secret is looked for
	// again every 5s (or the operator's --min-interval).
	// +optional
	Authorization *Authorization `json:"authorization,omitempty"`

	// service is the Service through which agents reach the tools. Its DNS
	// name and port make up the invoke and MCP endpoints published in the tool
	// table, always in the ToolSet's own namespace:
	// <scheme>://<name>.<namespace>.svc.<cluster domain>:<port>/tools/<tool>.
	// Without it the tools are still published, but with no endpoint, and
	// the ToolSet's status says so. A Service of type ExternalName or
	// without a selector, whose name may lead outside the namespace, is
	// refused the same way (Ready reason ServiceRefused).
	// +optional
	Service *ServiceReference `json:"service,omitempty"`

	// prefix is prepended to the name of every tool of this ToolSet in the
	// tool table, for example "crm_". The prefixed name must still be a valid
	// tool name.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]*$`
	Prefix string `json:"prefix,omitempty"`

	// include lists glob patterns of the tool names, before the prefix, to
	// publish. Empty means all. A pattern is in path.Match syntax: '*'
	// matches any run of characters, '?' any one, '[...]' or '[^...]' one of
	// (or none of) a class of characters and ranges such as "[a-z]", and a
	// backslash escapes the character after it; "query_*" publishes every
	// tool whose name starts with query_. The API server refuses a pattern
	// that path.Match would refuse, such as an unclosed '[', an empty class,
	// a range without an end ("[a-]") or a trailing backslash.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^(?s:\*|\?|[^*?\\\[]|\\.|\[(?:\^(?:[^\\\-\]]|\\.)(?:-(?:[^\\\-\]]|\\.))?|(?:[^\\\-\]^]|\\.)(?:-(?:[^\\\-\]]|\\.))?)(?:(?:[^\\\-\]]|\\.)(?:-(?:[^\\\-\]]|\\.))?)*\])*$')`,message="include pattern is not a path.Match glob: look for an unclosed or empty [ ] class, a range without an end, or a trailing backslash"
	Include []string `json:"include,omitempty"`

	// exclude lists glob patterns of tool names, before the prefix, not to
	// publish, in the syntax of include. It wins over include.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule=`self.matches(r'^(?s:\*|\?|[^*?\\\[]|\\.|\[(?:\^(?:[^\\\-\]]|\\.)(?:-(?:[^\\\-\]]|\\.))?|(?:[^\\\-\]^]|\\.)(?:-(?:[^\\\-\]]|\\.))?)(?:(?:[^\\\-\]]|\\.)(?:-(?:[^\\\-\]]|\\.))?)*\])*$')`,message="exclude pattern is not a path.Match glob: look for an unclosed or empty [ ] class, a range without an end, or a trailing backslash"
	Exclude []string `json:"exclude,omitempty"`

	// limits bound what one ToolSet may publish.
	// +optional
	// +kubebuilder:default={}
	Limits Limits `json:"limits,omitempty"`
}

// Protocol is how the operator lists a ToolSet's tools.
// +kubebuilder:validation:Enum=Toolkit;MCP
type Protocol string

// The protocols of a ToolSet.
const (
	// ProtocolToolkit reads toolkit's spec document.
	ProtocolToolkit Protocol = "Toolkit"
	// ProtocolMCP lists tools with MCP's tools/list, from any MCP server.
	ProtocolMCP Protocol = "MCP"
)

// Default paths by protocol, for a ToolSet that leaves spec.path out.
const (
	// DefaultToolkitPath is where toolkit serves its spec document.
	DefaultToolkitPath = "/.well-known/toolplane/tools"
	// DefaultMCPPath is where MCP servers conventionally serve Streamable
	// HTTP.
	DefaultMCPPath = "/mcp"
)

// IsMCP reports whether the ToolSet's tools are listed, and called, over MCP.
func (s *ToolSetSpec) IsMCP() bool { return s.Protocol == ProtocolMCP }

// PathOrDefault is spec.path, or the default path of the protocol when it is
// left out. The path has no CRD default because the default depends on the
// protocol; ToolSets stored before protocol existed keep the path they were
// stored with.
func (s *ToolSetSpec) PathOrDefault() string {
	switch {
	case s.Path != "":
		return s.Path
	case s.IsMCP():
		return DefaultMCPPath
	}
	return DefaultToolkitPath
}

// TLSConfig configures the verification of a Pod's serving certificate.
// +kubebuilder:validation:XValidation:rule="!(has(self.ca) && has(self.insecureSkipVerify) && self.insecureSkipVerify)",message="ca and insecureSkipVerify are mutually exclusive"
type TLSConfig struct {
	// ca is the PEM bundle of certificate authorities to trust, from a Secret
	// or ConfigMap in the ToolSet's namespace. Without it the system roots are
	// used. While the object or its key is missing, no Pod is scraped and
	// Ready says SecretNotFound, SecretKeyNotFound, ConfigMapNotFound or
	// ConfigMapKeyNotFound.
	// +optional
	CA *CASource `json:"ca,omitempty"`

	// serverName is the name to verify the certificate against. It defaults
	// to the Pod's IP address when the operator scrapes, and to the
	// Service's name (<name>.<namespace>.svc.<cluster domain>) when the
	// gateway calls the tools.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`

	// insecureSkipVerify disables certificate verification. Use it only for
	// testing.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// CASource names one key of a Secret or a ConfigMap. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.secret) != has(self.configMap)",message="exactly one of secret and configMap must be set"
type CASource struct {
	// secret is a key of a Secret in the ToolSet's namespace.
	// +optional
	Secret *KeyReference `json:"secret,omitempty"`
	// configMap is a key of a ConfigMap in the ToolSet's namespace.
	// +optional
	ConfigMap *KeyReference `json:"configMap,omitempty"`
}

// KeyReference names one key of an object in the ToolSet's namespace.
type KeyReference struct {
	// name is the name of the object: a DNS subdomain, as every Secret's
	// and ConfigMap's.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key is the key within the object's data: letters, digits, '-', '_'
	// and '.', as Kubernetes requires of every Secret and ConfigMap key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// Authorization configures the credentials sent with every scrape.
type Authorization struct {
	// bearerToken is a Secret key, in the ToolSet's namespace, whose value is
	// sent as "Authorization: Bearer <token>".
	// +required
	BearerToken KeyReference `json:"bearerToken"`
}

// ServiceReference names a Service in the ToolSet's namespace.
type ServiceReference struct {
	// name is the name of the Service in the ToolSet's namespace: a DNS-1035
	// label (lower-case letters, digits and '-', starting with a letter, at
	// most 63 characters), as Kubernetes requires of a Service name. It can
	// name no host, port or path of its own.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// scheme is the URL scheme of the published endpoints: http or https.
	// Left out, it is spec.scheme, so that a workload scraped over https is
	// also called over https; set it when the Service terminates TLS
	// differently from the Pods (for example http behind a mesh).
	// +optional
	// +kubebuilder:validation:Enum=http;https
	Scheme string `json:"scheme,omitempty"`
	// port is the Service port that serves the tools.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// Limits bound what one ToolSet may publish. Tools beyond a limit are
// marked Invalid with the reason; the rest are still published.
type Limits struct {
	// maxTools is the largest number of tools one Pod may serve. A spec
	// document with more is rejected whole. Whatever it says, the ToolSet
	// publishes at most the operator's ceiling (--max-tools-per-toolset);
	// the tools past it are Denied with reason OverBudget.
	// +optional
	// +kubebuilder:default=256
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxTools int32 `json:"maxTools,omitempty"`

	// maxSchemaBytes is the largest size, in bytes, of one tool's input or
	// output schema. The operator's ceiling (--max-schema-bytes) caps it.
	// +optional
	// +kubebuilder:default=65536
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=1048576
	MaxSchemaBytes int32 `json:"maxSchemaBytes,omitempty"`

	// callsPerMinute is how many calls a minute the ToolSet's workload can
	// take, from every caller and for every tool of the ToolSet together.
	// The gateway holds the calls it routes within it: a call over it is
	// an isError result that says when to retry. It is a token bucket in
	// each gateway replica, holding a minute's worth of calls, so with N
	// replicas the workload may get up to N times as many; calls that do
	// not pass through the gateway are not counted. Left out, there is no
	// limit but the gateway's own (--max-calls-per-caller-per-minute).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	CallsPerMinute *int32 `json:"callsPerMinute,omitempty"`
}

// ToolSetStatus is what the operator last observed of a ToolSet.
type ToolSetStatus struct {
	// observedGeneration is the generation of the spec that this status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions summarise the ToolSet. Ready is the summary; Degraded,
	// Stale and Conflicted give detail, and Clamped says whether an admin
	// ceiling lowered what the spec asks for.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// pods counts the selected Pods and how their last scrape went.
	// +optional
	Pods PodCounts `json:"pods,omitempty"`

	// revision is the revision of the tool list the selected Pods serve,
	// from their spec documents; with protocol MCP, which has none, the
	// sha256 of the normalised tools/list. When replicas disagree during a
	// rollout it is the revision most of them serve; while tools are held
	// through an outage, the revision they were scraped at.
	// +optional
	Revision string `json:"revision,omitempty"`

	// publishedTools is the number of tools in state Published.
	// +optional
	PublishedTools int32 `json:"publishedTools,omitempty"`

	// conflictedTools is the number of tools in state Conflicted.
	// +optional
	ConflictedTools int32 `json:"conflictedTools,omitempty"`

	// tools is every tool the selected Pods serve, and what became of it,
	// sorted by name. It lists at most 1000 tools, so that the object stays
	// within the API server's size limit: beyond that, Published tools are
	// left out first, then Filtered, Stale, Pending, Skewed, Conflicted,
	// Denied and Invalid ones, and omittedTools counts them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Tools []ToolStatus `json:"tools,omitempty"`

	// omittedTools is the number of tools left out of tools by its limit.
	// publishedTools and conflictedTools still count them.
	// +optional
	OmittedTools int32 `json:"omittedTools,omitempty"`
}

// PodCounts counts Pods.
type PodCounts struct {
	// selected is the number of Running and Ready Pods the selector matches.
	// +optional
	Selected int32 `json:"selected,omitempty"`
	// scraped is the number of those whose last scrape succeeded.
	// +optional
	Scraped int32 `json:"scraped,omitempty"`
	// failed is the number of those whose last scrape failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// ToolState is what became of one tool.
// +kubebuilder:validation:Enum=Published;Conflicted;Denied;Pending;Invalid;Filtered;Skewed;Stale
type ToolState string

// The states of a tool.
const (
	// ToolPublished: the tool is in the tool table under its name, as
	// written: the table readers see has it under this ToolSet.
	ToolPublished ToolState = "Published"
	// ToolConflicted: another ToolSet owns the name; owner names it.
	ToolConflicted ToolState = "Conflicted"
	// ToolInvalid: the tool breaks a rule or a limit; reason says which.
	ToolInvalid ToolState = "Invalid"
	// ToolFiltered: include or exclude leaves the tool out.
	ToolFiltered ToolState = "Filtered"
	// ToolSkewed: some ready Pods serve the tool and others do not, as
	// during a rollout. It is published once every ready Pod serves it.
	ToolSkewed ToolState = "Skewed"
	// ToolStale: the Pods cannot be scraped; the last good tool is still
	// published until the grace period ends.
	ToolStale ToolState = "Stale"
	// ToolDenied: a ToolNamePolicy reserves the name for other namespaces,
	// or an admin ceiling forbids the tool; reason names which. owner names
	// the ToolSet that owns the name, if any.
	ToolDenied ToolState = "Denied"
	// ToolPending: nobody owns the name for now. After an operator restart
	// or a leader failover, a name without an owner is handed out only once
	// every ToolSet has been heard from (within --table-restore-timeout
	// of the caches syncing), so that the earliest-created claimant takes it
	// whatever order the ToolSets are reconciled in. A tool whose name this
	// ToolSet owns but the tool table does not have yet is Pending too,
	// with reason AwaitingWrite, until the table is written: a tool is
	// Published only while the table readers see has it.
	ToolPending ToolState = "Pending"
)

// ToolStatus is what became of one tool.
type ToolStatus struct {
	// name is the published name: prefix plus sourceName.
	Name string `json:"name"`
	// sourceName is the name the Pods serve the tool under.
	// +optional
	SourceName string `json:"sourceName,omitempty"`
	// state is what became of the tool.
	State ToolState `json:"state"`
	// reason explains a state other than Published, or why a Published tool
	// is still published while the spec is invalid.
	// +optional
	Reason string `json:"reason,omitempty"`
	// owner is the namespace/name of the ToolSet that owns the name, when
	// state is Conflicted, or Denied while another ToolSet owns it.
	// +optional
	Owner string `json:"owner,omitempty"`
	// lastBreakingChange is the last change to the published tool that may
	// break its callers, as the operator classified it against the version
	// it published before. Compatible changes leave it as it is.
	// +optional
	LastBreakingChange *BreakingChange `json:"lastBreakingChange,omitempty"`
}

// BreakingChange records a change to a published tool that may break the
// agents that call it: a new required property, a removed property, a
// narrowed type, enum or bound, and the like.
type BreakingChange struct {
	// revision is the revision of the spec document that brought the
	// change (status.revision at the time).
	// +optional
	// +kubebuilder:validation:MaxLength=80
	Revision string `json:"revision,omitempty"`
	// time is when the operator saw the change.
	// +required
	Time metav1.Time `json:"time"`
	// message lists the breaking changes, each with its JSON path, cut at
	// 512 bytes. The BreakingChange event on the ToolSet lists them too.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// ToolSet is in the "toolplane" category and, on purpose, not in "all":
// `kubectl delete all --all` must leave ToolSets, and so the cluster's tool
// names, alone.

// ToolSet points the operator at Pods that serve tools. The operator scrapes
// their spec endpoints, keeps every tool name unique across the cluster, and
// publishes the tools in the cluster's tool table.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ts,categories=toolplane
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.publishedTools`
// +kubebuilder:printcolumn:name="Conflicts",type=integer,JSONPath=`.status.conflictedTools`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ToolSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which Pods serve tools and how to read them.
	// +required
	Spec ToolSetSpec `json:"spec"`

	// status is what the operator last observed.
	// +optional
	Status ToolSetStatus `json:"status,omitempty"`
}

// ToolSetList is a list of ToolSets.
// +kubebuilder:object:root=true
type ToolSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolSet `json:"items"`
}
