// Package install tests what users install: the kustomize bases in config/,
// the samples, the Helm chart in charts/toolplane and the Dockerfile. Every
// manifest is rendered the way a user renders it (helm template, kustomize
// build, kubectl apply -f) and sent to a real kube-apiserver (envtest) as a
// server-side dry-run, and the rendered RBAC and Deployments are checked for
// least privilege and hardening.
//
// The tests need helm, built by `make helm` and named by the HELM variable,
// which `make test` sets.
package install
