package apiserver

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// rbacFixture binds jane to a Role reading pods in team-a, the group
// viewers to an aggregated ClusterRole (its rules from a labelled one),
// and service account team-a/builder to edit deployments there.
func rbacFixture(t *testing.T, ts *testServer) {
	g := NewWithT(t)
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "jane-reads-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "jane"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{Name: "viewer"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"aggregate-to-viewer": "true"}}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-viewer", Labels: map[string]string{"aggregate-to-viewer": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{NonResourceURLs: []string{"/healthz", "/metrics/*"}, Verbs: []string{"get"}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "viewers"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "builder-deploys"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestSubjectAccessReviewsEvaluateTheClustersRBAC(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	rbacFixture(t, ts)
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	sar := func(user string, groups []string, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		out, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: ra, NonResourceAttributes: nra},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return out.Status
	}
	podsIn := func(ns, verb string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "pods"}
	}

	st := sar("jane", nil, podsIn("team-a", "list"), nil)
	g.Expect(st.Allowed).To(BeTrue())
	g.Expect(st.Reason).To(Equal(`RBAC: allowed by RoleBinding "jane-reads-pods" of Role "pod-reader" to User "jane" in namespace "team-a"`))
	g.Expect(sar("jane", nil, podsIn("team-a", "delete"), nil).Allowed).To(BeFalse(), "a verb the role lacks")
	g.Expect(sar("jane", nil, podsIn("default", "list"), nil).Allowed).To(BeFalse(), "another namespace")
	g.Expect(sar("jane", nil, &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "get", Resource: "pods", Subresource: "log", Name: "p"}, nil).Allowed).To(BeTrue())
	g.Expect(sar("jane", nil, &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "create", Resource: "pods", Subresource: "exec", Name: "p"}, nil).Allowed).To(BeFalse())
	g.Expect(sar("joe", nil, podsIn("team-a", "list"), nil).Allowed).To(BeFalse(), "nobody bound joe")

	// An aggregated ClusterRole has the rules of the roles it selects;
	// non-resource rules come through a ClusterRoleBinding.
	g.Expect(sar("joe", []string{"viewers"}, &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "nodes"}, nil).Allowed).To(BeTrue())
	g.Expect(sar("joe", []string{"viewers"}, nil, &authorizationv1.NonResourceAttributes{Path: "/metrics/cadvisor", Verb: "get"}).Allowed).To(BeTrue())
	g.Expect(sar("joe", []string{"viewers"}, nil, &authorizationv1.NonResourceAttributes{Path: "/readyz", Verb: "get"}).Allowed).To(BeFalse())

	// A service account subject without a namespace is of its RoleBinding's.
	sa := &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale"}
	g.Expect(sar("system:serviceaccount:team-a:builder", nil, sa, nil).Allowed).To(BeTrue())
	g.Expect(sar("system:serviceaccount:default:builder", nil, sa, nil).Allowed).To(BeFalse())

	// system:masters may do anything, bound or not.
	g.Expect(sar("root", []string{"system:masters"}, podsIn("kube-system", "delete"), nil).Allowed).To(BeTrue())

	// LocalSubjectAccessReviews are namespaced; the namespace must match.
	local, err := cs.AuthorizationV1().LocalSubjectAccessReviews("team-a").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "jane", ResourceAttributes: podsIn("team-a", "get")},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local.Status.Allowed).To(BeTrue())
	g.Expect(local.Namespace).To(Equal("team-a"))
	_, err = cs.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "jane", ResourceAttributes: podsIn("team-a", "get")},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "got %v", err)

	// A review without a subject or without attributes is invalid.
	_, err = cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: podsIn("team-a", "get")},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	_, err = cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "jane"},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)

	// Reviews are answered, not stored: there is nothing to read back.
	_, err = cs.AuthorizationV1().RESTClient().Get().AbsPath("/apis/authorization.k8s.io/v1/subjectaccessreviews").DoRaw(ctx)
	g.Expect(apierrors.IsMethodNotSupported(err)).To(BeTrue(), "got %v", err)
}

func TestSelfReviewsAnswerForTheClientCertificatesUser(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()

	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(who.Status.UserInfo.Username).To(Equal("kubernetes-admin"))
	g.Expect(who.Status.UserInfo.Groups).To(Equal([]string{"system:masters", "system:authenticated"}))

	ssar, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ssar.Status.Allowed).To(BeTrue())

	rules, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules.Status.ResourceRules).To(ContainElement(authorizationv1.ResourceRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}))
}

func TestServiceAccountTokensPassTokenReviews(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	cs := clientset(t, ts, "c1")
	ctx := context.Background()
	sa, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Split(tr.Status.Token, ".")).To(HaveLen(3), "a JWT")
	g.Expect(tr.Status.ExpirationTimestamp.Time).To(BeTemporally("~", tr.CreationTimestamp.Add(3600e9), 2e9))

	review := func(token string, audiences ...string) authenticationv1.TokenReviewStatus {
		out, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return out.Status
	}
	st := review(tr.Status.Token, "vault")
	g.Expect(st.Authenticated).To(BeTrue())
	g.Expect(st.User.Username).To(Equal("system:serviceaccount:default:robot"))
	g.Expect(st.User.UID).To(Equal(string(sa.UID)))
	g.Expect(st.User.Groups).To(ConsistOf("system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"))
	g.Expect(review(tr.Status.Token, "other").Authenticated).To(BeFalse(), "another audience")
	g.Expect(review(tr.Status.Token[:len(tr.Status.Token)-2]+"xx").Authenticated).To(BeFalse(), "a forged signature")

	// A token outlives neither its service account nor a new one of the same name.
	g.Expect(cs.CoreV1().ServiceAccounts("default").Delete(ctx, "robot", metav1.DeleteOptions{})).To(Succeed())
	_, err = cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(review(tr.Status.Token).Authenticated).To(BeFalse())

	_, err = cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "ghost", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	_, err = cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(60)},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
}

func ptrInt64(v int64) *int64 { return &v }

func TestKubectlAuthCanIAndWhoAmI(t *testing.T) {
	g := NewWithT(t)
	ts := startServer(t, store.Options{}, "c1")
	rbacFixture(t, ts)
	_, kubectl := kubectlFor(t, ts, "c1")

	out, err := kubectl("auth", "whoami")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`Username\s+kubernetes-admin`))
	g.Expect(out).To(MatchRegexp(`Groups\s+\[system:masters system:authenticated\]`))

	out, err = kubectl("auth", "can-i", "delete", "nodes", "--all-namespaces")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.TrimSpace(out)).To(Equal("yes"))
	out, err = kubectl("auth", "can-i", "--list", "-n", "default")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`\*\.\*\s+\[\]\s+\[\]\s+\[\*\]`))

	// Impersonated, the reviews are RBAC's answers for that user.
	out, err = kubectl("auth", "can-i", "list", "pods", "-n", "team-a", "--as", "jane")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.TrimSpace(out)).To(Equal("yes"))
	out, err = kubectl("auth", "can-i", "delete", "pods", "-n", "team-a", "--as", "jane")
	g.Expect(err).To(HaveOccurred(), "can-i exits 1 for no")
	g.Expect(strings.TrimSpace(out)).To(Equal("no"))
	out, err = kubectl("auth", "can-i", "update", "deployments", "--subresource", "scale", "-n", "default", "--as", "system:serviceaccount:team-a:builder")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(strings.TrimSpace(out)).To(Equal("no"), "bound in team-a only")
	out, err = kubectl("auth", "can-i", "update", "deployments", "--subresource", "scale", "-n", "team-a", "--as", "system:serviceaccount:team-a:builder")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.TrimSpace(out)).To(Equal("yes"))
	out, err = kubectl("auth", "can-i", "--list", "-n", "team-a", "--as", "jane")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`pods\s+\[\]\s+\[\]\s+\[get list\]`))
	out, err = kubectl("auth", "whoami", "--as", "jane", "--as-group", "viewers")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`Username\s+jane`))
	g.Expect(out).To(MatchRegexp(`Groups\s+\[viewers system:authenticated\]`))
}
