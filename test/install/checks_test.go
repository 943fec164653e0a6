package install

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// hardeningProblems lists how a Deployment falls short of the hardening
// every shipped workload must have: the restricted Pod Security Standard
// (non-root, no privilege escalation, every capability dropped, a seccomp
// profile), a read-only root filesystem, liveness and readiness probes, and
// resource requests plus a memory limit.
func hardeningProblems(d *appsv1.Deployment) []string {
	var problems []string
	add := func(c, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s/%s container %s: ", d.Namespace, d.Name, c)+fmt.Sprintf(format, args...))
	}
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		problems = append(problems, fmt.Sprintf("%s/%s: shares a host namespace", d.Namespace, d.Name))
	}
	if len(pod.Containers) == 0 {
		problems = append(problems, fmt.Sprintf("%s/%s: no containers", d.Namespace, d.Name))
	}
	for i, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		// A container's own setting wins over the Pod's.
		nonRoot := psc.RunAsNonRoot
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			add(c.Name, "runAsNonRoot is not true")
		}
		if uid := firstNonNil(sc.RunAsUser, psc.RunAsUser); uid != nil && *uid == 0 {
			add(c.Name, "runs as UID 0")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			add(c.Name, "readOnlyRootFilesystem is not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add(c.Name, "allowPrivilegeEscalation is not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			add(c.Name, "is privileged")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			add(c.Name, "does not drop ALL capabilities")
		} else if len(sc.Capabilities.Add) > 0 {
			add(c.Name, "adds capabilities %v", sc.Capabilities.Add)
		}
		seccomp := psc.SeccompProfile
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
			add(c.Name, "has no RuntimeDefault or Localhost seccomp profile")
		}
		if i < len(pod.InitContainers) {
			continue // Init containers run to completion: probes do not apply.
		}
		if c.LivenessProbe == nil {
			add(c.Name, "has no liveness probe")
		}
		if c.ReadinessProbe == nil {
			add(c.Name, "has no readiness probe")
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
				add(c.Name, "requests no %s", r)
			}
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
			add(c.Name, "has no memory limit")
		}
	}
	return problems
}

func firstNonNil[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

// writeVerbs are the verbs that change objects.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// rbacRole is a ClusterRole (namespace "") or a Role, reduced to what the
// checks need.
type rbacRole struct {
	kind, namespace, name string
	rules                 []rbacv1.PolicyRule
}

// rbacProblems lists how a set of roles breaks least privilege: any
// wildcard; a ClusterRole that writes ConfigMaps or Leases (those writes
// belong in a Role in the table namespace); a Role that writes them anywhere
// else; and listing or watching Secrets (the operator reads one Secret at a
// time, by name).
func rbacProblems(roles []rbacRole, tableNamespace string) []string {
	var problems []string
	for _, r := range roles {
		ref := r.kind + " " + r.name
		if r.namespace != "" {
			ref = r.kind + " " + r.namespace + "/" + r.name
		}
		for i, rule := range r.rules {
			add := func(format string, args ...any) {
				problems = append(problems, fmt.Sprintf("%s rule %d: ", ref, i)+fmt.Sprintf(format, args...))
			}
			for field, values := range map[string][]string{
				"apiGroups": rule.APIGroups, "resources": rule.Resources, "verbs": rule.Verbs,
				"resourceNames": rule.ResourceNames, "nonResourceURLs": rule.NonResourceURLs,
			} {
				for _, v := range values {
					if v == "*" || (field == "resources" && (v == "*/*" || hasWildcardSubresource(v))) {
						add("wildcard %q in %s", v, field)
					}
				}
			}
			for _, res := range []struct{ group, resource string }{{"", "configmaps"}, {"coordination.k8s.io", "leases"}} {
				if !slices.Contains(rule.APIGroups, res.group) || !slices.Contains(rule.Resources, res.resource) {
					continue
				}
				for _, v := range rule.Verbs {
					if !slices.Contains(writeVerbs, v) {
						continue
					}
					switch {
					case r.kind == "ClusterRole":
						add("%s %s cluster-wide", v, res.resource)
					case r.namespace != tableNamespace:
						add("%s %s outside the table namespace %q", v, res.resource, tableNamespace)
					}
				}
			}
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
				for _, v := range rule.Verbs {
					if v == "list" || v == "watch" {
						add("%s secrets", v)
					}
				}
			}
		}
	}
	return problems
}

func hasWildcardSubresource(resource string) bool {
	return strings.HasSuffix(resource, "/*")
}

// roles gathers the ClusterRoles and Roles of a rendering.
func (m manifests) roles() []rbacRole {
	var out []rbacRole
	for _, u := range m.ofKind("ClusterRole") {
		cr := fromUnstructured[rbacv1.ClusterRole](u)
		out = append(out, rbacRole{kind: "ClusterRole", name: cr.Name, rules: cr.Rules})
	}
	for _, u := range m.ofKind("Role") {
		r := fromUnstructured[rbacv1.Role](u)
		out = append(out, rbacRole{kind: "Role", namespace: r.Namespace, name: r.Name, rules: r.Rules})
	}
	return out
}
