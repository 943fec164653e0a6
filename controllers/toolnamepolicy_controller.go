package controllers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/controllers/ownership"
)

// PolicyPublisher is the part of the publisher the policy reconciler
// drives: TablePublisher.
type PolicyPublisher interface {
	// SetPolicies replaces the policies in force and settles every name
	// under them at once.
	SetPolicies(ctx context.Context, policies []ownership.Policy) error
	// Governed counts the claims of names the policy matches, and those of
	// them from namespaces it does not permit.
	Governed(policy ownership.Policy) (governed, denied int)
}

// policiesKey is the one request of the policy reconciler: every policy,
// namespace and start event maps to it, so that every change re-evaluates
// every name at once, and bursts collapse into one reconcile.
var policiesKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "toolnamepolicies"}}

// policyCountsInterval is how often the policies' governed counts are
// brought up to date while nothing about the policies changes.
const policyCountsInterval = 30 * time.Second

// ToolNamePolicyReconciler gives the publisher the ToolNamePolicies in
// force, their namespace selectors resolved, and reports in each policy's
// status how many tools it governs.
type ToolNamePolicyReconciler struct {
	// Client reads policies and namespaces from the cache and writes status.
	Client client.Client
	// Publisher applies the policies.
	Publisher PolicyPublisher

	applied []ownership.Policy
	start   chan event.GenericEvent
}

// SetupWithManager registers the reconciler. It reconciles once at start,
// with or without policies, so that the publisher learns there are none.
func (r *ToolNamePolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Publisher == nil {
		return errors.New("the ToolNamePolicy reconciler needs a Publisher")
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	r.start = make(chan event.GenericEvent, 1)
	r.start <- event.GenericEvent{Object: &v1alpha1.ToolNamePolicy{}}
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{policiesKey}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("toolnamepolicy").
		WatchesRawSource(source.Channel(r.start, all)).
		Watches(&v1alpha1.ToolNamePolicy{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, all, builder.WithPredicates(namespaceLabelsChanged)).
		Complete(r)
}

// namespaceLabelsChanged passes namespaces created, deleted or relabelled:
// what can move one in or out of a policy's namespaceSelector.
var namespaceLabelsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// Reconcile applies every policy at once and brings their status up to
// date.
func (r *ToolNamePolicyReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	items, resolved, problems, err := ResolvePolicies(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	policies := slices.Clone(resolved)
	slices.SortFunc(policies, func(a, b ownership.Policy) int { return strings.Compare(a.Name, b.Name) })
	// Applied only when they change: the periodic pass that refreshes the
	// counts settles nothing.
	if r.applied == nil || !reflect.DeepEqual(r.applied, policies) {
		if err := r.Publisher.SetPolicies(ctx, policies); err != nil {
			return ctrl.Result{}, fmt.Errorf("applying the ToolNamePolicies: %w", err)
		}
		r.applied = policies
	}

	var errs []error
	for i := range items {
		errs = append(errs, r.patchStatus(ctx, &items[i], resolved[i], problems[i]))
	}
	return ctrl.Result{RequeueAfter: policyCountsInterval}, errors.Join(errs...)
}

// ResolvePolicies lists the cluster's ToolNamePolicies and resolves each
// into the ownership rule's Policy, in list order, with the problem of each
// (a namespace selector that cannot be parsed). The operator applies them;
// kubectl toolplane lint plans with them, so both decide alike.
func ResolvePolicies(ctx context.Context, c client.Reader) (items []v1alpha1.ToolNamePolicy, policies []ownership.Policy, problems []error, err error) {
	var list v1alpha1.ToolNamePolicyList
	if err := c.List(ctx, &list); err != nil {
		return nil, nil, nil, fmt.Errorf("listing ToolNamePolicies: %w", err)
	}
	var namespaces corev1.NamespaceList
	if slices.ContainsFunc(list.Items, func(p v1alpha1.ToolNamePolicy) bool { return p.Spec.NamespaceSelector != nil }) {
		if err := c.List(ctx, &namespaces); err != nil {
			return nil, nil, nil, fmt.Errorf("listing namespaces: %w", err)
		}
	}
	policies = make([]ownership.Policy, len(list.Items))
	problems = make([]error, len(list.Items))
	for i := range list.Items {
		policies[i], problems[i] = resolvePolicy(&list.Items[i], namespaces.Items)
	}
	return list.Items, policies, problems, nil
}

// resolvePolicy turns a ToolNamePolicy into the rule's Policy, its
// namespace selector resolved. A selector that cannot be parsed selects no
// namespace, so that the names stay reserved for the namespaces listed: a
// mistake never opens a name to everyone.
func resolvePolicy(tnp *v1alpha1.ToolNamePolicy, namespaces []corev1.Namespace) (ownership.Policy, error) {
	p := ownership.Policy{Name: tnp.Name, Names: slices.Clone(tnp.Spec.Names), Namespaces: slices.Clone(tnp.Spec.Namespaces)}
	var err error
	if s := tnp.Spec.NamespaceSelector; s != nil {
		var sel labels.Selector
		if sel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			err = fmt.Errorf("spec.namespaceSelector: %w", err)
		} else {
			for i := range namespaces {
				if sel.Matches(labels.Set(namespaces[i].Labels)) && !slices.Contains(p.Namespaces, namespaces[i].Name) {
					p.Namespaces = append(p.Namespaces, namespaces[i].Name)
				}
			}
		}
	}
	slices.Sort(p.Names)
	slices.Sort(p.Namespaces)
	return p, err
}

func (r *ToolNamePolicyReconciler) patchStatus(ctx context.Context, tnp *v1alpha1.ToolNamePolicy, p ownership.Policy, problem error) error {
	before := tnp.DeepCopy()
	governed, denied := r.Publisher.Governed(p)
	st := &tnp.Status
	st.ObservedGeneration = tnp.Generation
	st.GovernedTools, st.DeniedTools = int32(governed), int32(denied)
	cond := metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPolicyInForce, ObservedGeneration: tnp.Generation,
		Message: fmt.Sprintf("the names are reserved for %s", plural(len(p.Namespaces), "namespace")),
	}
	if problem != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec
		cond.Message = truncate(problem.Error()+"; the names stay reserved for spec.namespaces only", 1024)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if equality.Semantic.DeepEqual(before.Status, tnp.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, tnp, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching the status of ToolNamePolicy %s: %w", tnp.Name, err)
	}
	return nil
}
