// Command kubectl-toolplane is the kubectl plugin of toolplane: put it on the
// PATH and run `kubectl toolplane`. It reads the tool table and the
// ToolSets' status, lints a workload's spec document against the live
// cluster before it ships, and calls tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// version is stamped by `make release-dry-run` (-X main.version).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(printError(os.Stderr, err))
	}
}

// printError prints an error as kubectl does, `error: <message>`, and
// returns the exit code: an exitError's own (its report is printed
// already), else 1.
func printError(w io.Writer, err error) int {
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	fmt.Fprintln(w, "error:", err)
	return 1
}

// exitError ends the command with a code after it has printed its report:
// lint's findings, say.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// options are the flags every command shares.
type options struct {
	config         *genericclioptions.ConfigFlags
	tableNamespace string
	tableName      string
	out, errOut    io.Writer

	// newClient makes the cluster client; tests leave it as it is.
	newClient func() (client.Client, error)
}

const rootExample = `  # List the tools of the current namespace, as the tool table publishes them
  kubectl toolplane tools

  # List every tool in the cluster, and every name that two ToolSets claim
  kubectl toolplane tools -A
  kubectl toolplane tools -A --conflicts

  # Show who owns a tool, who else claims it, its schemas and its breaking changes
  kubectl toolplane describe tool crm_query_customer

  # Preview what a build would publish, before it ships (exits 1 on a breaking change or a conflict)
  kubectl toolplane lint ./tools.json -n crm --toolset crm-tools

  # Compare two builds' spec documents, with no cluster
  kubectl toolplane lint --offline released/tools.json ./tools.json

  # Call a tool, through the API server from your machine, or through the gateway
  kubectl toolplane call crm_query_customer --args '{"id":"c-42"}'
  kubectl toolplane call crm_query_customer -f args.json --gateway http://localhost:8080/mcp

Shell completion: put kubectl_complete-toolplane on the PATH beside kubectl-toolplane,
and kubectl's own completion (kubectl completion bash|zsh|fish) completes commands,
tool names, ToolSets and namespaces.`

func newRootCommand(out, errOut io.Writer) *cobra.Command {
	o := &options{
		config: genericclioptions.NewConfigFlags(true),
		out:    out, errOut: errOut,
	}
	o.newClient = o.client
	root := &cobra.Command{
		Use:   "kubectl-toolplane",
		Short: "See, lint and call the tools that toolplane publishes",
		Long: `kubectl toolplane reads toolplane's tool table and the status of its ToolSets.

It shows which ToolSet owns each tool name and who else claims it, previews what a
workload's spec document would publish before it ships (terraform plan for tools),
flags the changes that would break the agents that call a tool, and calls tools.`,
		Example:       rootExample,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	// kubectl runs the binary kubectl-toolplane as `kubectl toolplane`:
	// every usage line names it so, and the binary's name stays what
	// cobra's hidden __complete command is found under.
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl toolplane"}
	// kubectl completes its plugins through kubectl_complete-toolplane,
	// which calls `kubectl-toolplane __complete`; a script of our own
	// would replace kubectl's completion, so there is none.
	root.CompletionOptions.DisableDefaultCmd = true
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.tableNamespace, "table-namespace", "toolplane-system", "The namespace of the tool table: the operator's namespace.")
	root.PersistentFlags().StringVar(&o.tableName, "table-name", "toolplane-tools", "The name of the tool table's ConfigMap.")
	registerCompletions(root, o)
	root.AddCommand(newToolsCommand(o), newDescribeCommand(o), newLintCommand(o), newCallCommand(o))
	root.AddCommand(newSearchCommand(o))
	return root
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, eventsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func (o *options) client() (client.Client, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// namespace is -n, or the kubeconfig context's namespace, or "default".
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}
