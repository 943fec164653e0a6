package gateway

import "testing"

func TestOnlyTheAPIServerMakesAServiceAccount(t *testing.T) {
	sa := "system:serviceaccount:team:bot"
	if ns := callerNamespace(&Caller{User: sa, AuthMode: "kubernetes"}); ns != "team" {
		t.Errorf("a reviewed ServiceAccount's namespace = %q, want team", ns)
	}
	if ns := callerNamespace(&Caller{User: sa, AuthMode: "oidc"}); ns != "" {
		t.Errorf("an IdP's user named like a ServiceAccount counts as namespace %q, want none", ns)
	}
	if a := auditCallerOf(&Caller{User: sa, AuthMode: "oidc"}); a.ServiceAccount != "" {
		t.Errorf("an IdP's user named like a ServiceAccount is audited as ServiceAccount %q", a.ServiceAccount)
	}
}
