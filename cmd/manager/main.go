// Command manager runs the toolplane operator: the ToolSet reconciler and
// the tool-table publisher.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers"
	"github.com/toolplane/toolplane/controllers/ownership"
	"github.com/toolplane/toolplane/internal/metricsauth"
	"github.com/toolplane/toolplane/toolkit/spec"
)

func main() {
	var (
		metricsAddr        string
		metricsSecure      bool
		probeAddr          string
		pprofAddr          string
		leaderElect        bool
		tableNamespace     string
		tableName          string
		maxScrapes         int
		maxResponseSize    int64
		restoreTimeout     time.Duration
		partGrace          time.Duration
		leaseDuration      time.Duration
		renewDeadline      time.Duration
		retryPeriod        time.Duration
		maxScrapesPerNS    int
		maxIdleScrapeConns int
		scrapeBudget       int64
		podSelector        string
		clusterDomain      string
		ceilings           controllers.Ceilings
		watchNamespaces    string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", `The address the metrics endpoint binds to; "0" disables it.`)
	flag.BoolVar(&metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, only to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview). "+
			"False serves plain HTTP to anyone who reaches the port.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the health and readiness probes bind to.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", `The address that serves net/http/pprof, for profiling; empty or "0" disables it.`)
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	flag.StringVar(&tableNamespace, "table-namespace", "toolplane-system", "The namespace of the tool-table ConfigMap (the operator's own namespace).")
	flag.StringVar(&tableName, "table-name", "toolplane-tools", "The name of the tool-table ConfigMap.")
	flag.DurationVar(&restoreTimeout, "table-restore-timeout", controllers.DefaultRestoreTimeout,
		"How long, after the operator starts or takes over and its caches have synced, the tools read back from the tool table are kept for ToolSets that have not been scraped yet, "+
			"and a name without an owner waits (Pending) for every ToolSet to be heard from before it is handed out. "+
			"Until then the table is never published smaller than it was found.")
	flag.DurationVar(&partGrace, "table-part-grace-period", controllers.DefaultTablePartGracePeriod,
		"How long a chunk of a split tool table is kept after the index stopped naming it, so that an agent reading the previous index still finds it.")
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long a replica waits, after the leader last renewed its lease, before it takes over.")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew its lease before it steps down; less than the lease duration.")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often replicas try to acquire or renew the lease.")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "",
		"Comma-separated namespaces whose ToolSets, Pods, Secrets and CA ConfigMaps the operator reads; ToolSets elsewhere are ignored. "+
			"Empty means every namespace. The table namespace is always read for the table itself.")
	flag.IntVar(&maxScrapes, "max-concurrent-scrapes", 32, "The most scrapes in flight at once, across all ToolSets.")
	flag.Int64Var(&maxResponseSize, "max-response-bytes", 4<<20, "The largest spec document read from one Pod, in bytes.")
	flag.IntVar(&maxScrapesPerNS, "max-concurrent-scrapes-per-namespace", controllers.DefaultMaxConcurrentScrapesPerNamespace,
		"The most scrapes in flight at once for the ToolSets of one namespace, so that no namespace takes every slot.")
	flag.IntVar(&maxIdleScrapeConns, "max-idle-scrape-connections", controllers.DefaultMaxIdleScrapeConnections,
		"The most connections to Pods kept open between scrapes, across all ToolSets (about 20 KiB each); "+
			"past it, Pods without one kept connect anew each round. 0 keeps none.")
	flag.Int64Var(&scrapeBudget, "scrape-memory-budget", controllers.DefaultScrapeMemoryBudget,
		"The bytes the scrapes in flight hold at once, across all ToolSets: what they read and what it decodes to, charged as they read. "+
			"A scrape waits for its first share within its timeout; one that needs more while the budget is spent fails, and its ToolSet goes stale. "+
			"At least 4 times --max-response-bytes, so that one scrape of the largest document fits.")
	flag.StringVar(&clusterDomain, "cluster-domain", controllers.DefaultClusterDomain,
		"The cluster's DNS domain: endpoints name Services as <service>.<namespace>.svc.<cluster-domain>.")
	flag.StringVar(&podSelector, "pod-label-selector", "",
		"A label selector that scopes the Pod cache, for large clusters: only Pods it matches are cached, watched and scraped. "+
			"Empty caches every Pod (the default); see the README for what each costs in memory.")
	// Admin ceilings: what any ToolSet may ask for, whatever its spec says.
	flag.IntVar(&ceilings.MaxToolsPerToolSet, "max-tools-per-toolset", controllers.DefaultMaxToolsPerToolSet,
		"The most tools one ToolSet publishes; the rest are Denied (OverBudget).")
	flag.Func("max-schema-bytes", fmt.Sprintf("The ceiling of spec.limits.maxSchemaBytes, in bytes (default %d).", controllers.DefaultMaxSchemaBytes), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		ceilings.MaxSchemaBytes = int32(n)
		return err
	})
	flag.IntVar(&ceilings.MaxToolsPerNamespace, "max-tools-per-namespace", controllers.DefaultMaxToolsPerNamespace,
		"The most tools the ToolSets of one namespace publish together; the rest are Denied (OverBudget).")
	flag.Int64Var(&ceilings.MaxTableBytes, "max-table-bytes", controllers.DefaultMaxTableBytes,
		fmt.Sprintf("The largest tool table, in bytes of JSON; tools that would pass it are Denied (OverBudget). At most %d (64 MiB), what readers accept; "+
			"tools whose JSON the table's segments do not hold, or that would not fit the ConfigMaps once gzipped, are Denied besides.", spec.MaxTableBytes))
	flag.IntVar(&ceilings.MaxDescriptionBytes, "max-tool-description-bytes", controllers.DefaultMaxDescriptionBytes,
		"The longest description of one tool, in bytes; a tool with a longer one is Invalid.")
	flag.IntVar(&ceilings.MaxTitleBytes, "max-tool-title-bytes", controllers.DefaultMaxTitleBytes,
		"The longest title of one tool (and of its annotations), in bytes; a tool with a longer one is Invalid.")
	flag.IntVar(&ceilings.MaxAnnotationsBytes, "max-tool-annotations-bytes", controllers.DefaultMaxAnnotationsBytes,
		"The largest annotations of one tool, in bytes of JSON; a tool with larger ones is Invalid.")
	flag.IntVar(&ceilings.MaxMetaBytes, "max-tool-meta-bytes", controllers.DefaultMaxMetaBytes,
		"The largest _meta of one tool, in bytes of JSON; a tool with a larger one is Invalid.")
	flag.DurationVar(&ceilings.MinInterval, "min-interval", controllers.DefaultMinInterval, "The shortest scrape interval any ToolSet gets.")
	flag.DurationVar(&ceilings.MaxTimeout, "max-timeout", controllers.DefaultMaxTimeout,
		"The longest scrape timeout any ToolSet gets: no scrape waits on a Pod for longer.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(lazyValues(zap.New(zap.UseFlagOptions(&opts))))
	log := ctrl.Log.WithName("setup")
	if err := ceilings.Validate(); err != nil {
		log.Error(err, "Invalid admin ceiling")
		os.Exit(2)
	}
	if scrapeBudget < 4*maxResponseSize {
		log.Error(fmt.Errorf("--scrape-memory-budget %d is less than 4 times --max-response-bytes %d: a scrape of the largest document would never fit", scrapeBudget, maxResponseSize), "Invalid --scrape-memory-budget")
		os.Exit(2)
	}
	podCache := cache.ByObject{Transform: controllers.TrimPodForCache}
	if podSelector != "" {
		sel, err := labels.Parse(podSelector)
		if err != nil {
			log.Error(err, "Invalid --pod-label-selector")
			os.Exit(2)
		}
		podCache.Label = sel
	}
	watched, err := parseNamespaces(watchNamespaces)
	if err != nil {
		log.Error(err, "Invalid --watch-namespaces")
		os.Exit(2)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(metricsAddr, metricsSecure),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "toolplane-manager.toolplane.io",
		LeaderElectionNamespace: tableNamespace,
		// Leaving the leader's lease on shutdown lets a new leader take over
		// at once instead of waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		Cache: cache.Options{
			// The operator writes ConfigMaps only in its own namespace, so it
			// caches (and may list) them only there.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{tableNamespace: {}}},
				// Every Pod is cached to match it to ToolSets; only what the
				// reconciler reads is kept.
				// With --pod-label-selector, only the Pods it matches.
				&corev1.Pod{}: podCache,
				// Every Service, to refuse those a ToolSet names that could
				// route outside its namespace; only their type and selector.
				&corev1.Service{}: {Transform: controllers.TrimServiceForCache},
				// Every ToolSet, without its managed fields and kubectl's
				// last-applied copy of its spec.
				&v1alpha1.ToolSet{}: {Transform: controllers.TrimToolSetForCache},
			},
			DefaultTransform: cache.TransformStripManagedFields(),
			// Nil, every namespace; otherwise ToolSets and Pods are cached
			// only there, so the RBAC can be Roles in those namespaces.
			DefaultNamespaces: namespaceConfigs(watched),
		},
	})
	if err != nil {
		log.Error(err, "Unable to create the manager")
		os.Exit(1)
	}

	publisher := &controllers.TablePublisher{
		Namespace:       tableNamespace,
		Name:            tableName,
		RestoreTimeout:  restoreTimeout,
		PartGracePeriod: partGrace,
		WatchNamespaces: watched,
		Budget:          ownership.Budget{MaxToolsPerNamespace: ceilings.MaxToolsPerNamespace, MaxTableBytes: ceilings.MaxTableBytes},
		// No name changes hands before the ToolNamePolicy reconciler has
		// told the publisher which policies hold, none included.
		WaitForPolicies: true,
	}
	if err := publisher.SetupWithManager(mgr); err != nil {
		log.Error(err, "Unable to set up the tool-table publisher")
		os.Exit(1)
	}
	if err := (&controllers.ToolNamePolicyReconciler{Publisher: publisher}).SetupWithManager(mgr); err != nil {
		log.Error(err, "Unable to set up the ToolNamePolicy reconciler")
		os.Exit(1)
	}
	if err := (&controllers.ToolSetReconciler{
		Publisher:                        publisher,
		MaxConcurrentScrapes:             maxScrapes,
		MaxConcurrentScrapesPerNamespace: maxScrapesPerNS,
		MaxIdleScrapeConnections:         noneIfZero(maxIdleScrapeConns),
		ScrapeMemoryBudget:               scrapeBudget,
		MaxResponseBytes:                 maxResponseSize,
		Ceilings:                         ceilings,
		ClusterDomain:                    clusterDomain,
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "Unable to set up the ToolSet reconciler")
		os.Exit(1)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Unable to set up the health check")
		os.Exit(1)
	}
	// Not ready until the leader has read the table back and its caches
	// have synced; a standby replica is ready (see ReadyzCheck).
	if err := mgr.AddReadyzCheck("tool-table", publisher.ReadyzCheck(mgr.Elected())); err != nil {
		log.Error(err, "Unable to set up the ready check")
		os.Exit(1)
	}

	log.Info("Starting the manager", "tableNamespace", tableNamespace, "tableName", tableName)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
}

// metricsOptions serves metrics over HTTPS behind the API server's
// authentication and authorization when secure, as the kubebuilder scaffold
// does, with internal/metricsauth in place of controller-runtime's filter
// (the same questions and cache times, bounded, without k8s.io/apiserver's
// 30 MB of binary): the metrics name every ToolSet, so they are not for
// anonymous eyes.
// Without a certificate in the default directory the server makes a
// self-signed one, which a scraper that authenticates by token accepts with
// insecureSkipVerify. HTTP/2 is off: its Rapid Reset and stream-exhaustion
// attacks (CVE-2023-44487, CVE-2023-39325) are not worth the gain on a
// metrics port.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if !secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = metricsauth.WithAuthenticationAndAuthorization
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return opts
}

// parseNamespaces splits --watch-namespaces: namespace names (DNS labels),
// each once; empty means every namespace.
func parseNamespaces(list string) ([]string, error) {
	var out []string
	for ns := range strings.SplitSeq(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// namespaceConfigs is the cache's DefaultNamespaces for a list of
// namespaces: nil, every namespace, for an empty list.
func namespaceConfigs(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// noneIfZero maps a flag's 0, none, to a field whose zero means its default
// and a negative value none.
func noneIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
