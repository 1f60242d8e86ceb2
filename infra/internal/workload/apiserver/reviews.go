package apiserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Who a client is, as kube-apiserver's x509 authenticator says: the
// verified client certificate's common name is the user, its
// organizations the groups, and every authenticated user is also in
// system:authenticated. A request without a verified certificate (the
// Handler called in-process, not through Serve or ServeConn) is
// system:anonymous.
const (
	groupAuthenticated   = "system:authenticated"
	groupUnauthenticated = "system:unauthenticated"
	groupMasters         = "system:masters"
	userAnonymous        = "system:anonymous"
)

func requestUser(r *http.Request) authenticationv1.UserInfo {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return authenticationv1.UserInfo{Username: userAnonymous, Groups: []string{groupUnauthenticated}}
	}
	cert := r.TLS.VerifiedChains[0][0]
	groups := append(slices.Clone(cert.Subject.Organization), groupAuthenticated)
	return authenticationv1.UserInfo{Username: cert.Subject.CommonName, Groups: groups}
}

// impersonatedUser is who the Impersonate-* headers (kubectl --as,
// --as-group) name, as kube-apiserver's impersonation sets it: a service
// account's user is in its groups, everyone but system:anonymous in
// system:authenticated. A client of the cluster CA may impersonate anyone.
func impersonatedUser(r *http.Request) (authenticationv1.UserInfo, bool) {
	name := r.Header.Get(authenticationv1.ImpersonateUserHeader)
	if name == "" {
		return authenticationv1.UserInfo{}, false
	}
	u := authenticationv1.UserInfo{Username: name, UID: r.Header.Get(authenticationv1.ImpersonateUIDHeader)}
	u.Groups = append(u.Groups, r.Header.Values(authenticationv1.ImpersonateGroupHeader)...)
	if rest, ok := strings.CutPrefix(name, "system:serviceaccount:"); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok {
			u.Groups = append(u.Groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
		}
	}
	if name != userAnonymous && !slices.Contains(u.Groups, groupAuthenticated) {
		u.Groups = append(u.Groups, groupAuthenticated)
	}
	return u, true
}

// subject is who a request's self reviews are about: the impersonated
// user, else the client.
func subject(r *http.Request) (authenticationv1.UserInfo, bool) {
	if u, ok := impersonatedUser(r); ok {
		return u, true
	}
	return requestUser(r), false
}

// review answers a create of an access or token review: kube-apiserver
// computes these and stores nothing, and so does the Handler.
func (h *Handler) review(w http.ResponseWriter, r *http.Request, req *request) {
	_, body, err := decodeWrite(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkKind(req.res, body); err != nil {
		writeError(w, err)
		return
	}
	obj, err := typed(req.res, body)
	if err != nil {
		writeError(w, err)
		return
	}
	switch o := obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo, _ = subject(r)
	case *authenticationv1.TokenReview:
		o.Status = h.reviewToken(req.store, o.Spec)
	case *authorizationv1.SelfSubjectAccessReview:
		if err := validateAccessSpec(req.res, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes); err != nil {
			writeError(w, err)
			return
		}
		u, impersonated := subject(r)
		if !impersonated {
			// Every client the cluster CA signed may do anything here (the
			// Handler authorizes no request), so it is told so.
			o.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
			break
		}
		o.Status, err = authorize(req.store, authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: o.Spec.ResourceAttributes, NonResourceAttributes: o.Spec.NonResourceAttributes,
			User: u.Username, Groups: u.Groups, UID: u.UID,
		})
		if err != nil {
			writeError(w, err)
			return
		}
	case *authorizationv1.SelfSubjectRulesReview:
		if o.Spec.Namespace == "" {
			writeError(w, apierrors.NewBadRequest("no namespace on request"))
			return
		}
		u, impersonated := subject(r)
		if !impersonated || slices.Contains(u.Groups, groupMasters) {
			o.Status = authorizationv1.SubjectRulesReviewStatus{
				ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
				NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}
			break
		}
		if o.Status, err = rulesReview(req.store, u, o.Spec.Namespace); err != nil {
			writeError(w, err)
			return
		}
	case *authorizationv1.SubjectAccessReview:
		if err := validateSubjectAccessReview(req.res, o.Spec); err != nil {
			writeError(w, err)
			return
		}
		if o.Status, err = authorize(req.store, o.Spec); err != nil {
			writeError(w, err)
			return
		}
	case *authorizationv1.LocalSubjectAccessReview:
		if err := validateSubjectAccessReview(req.res, o.Spec); err != nil {
			writeError(w, err)
			return
		}
		if o.Spec.ResourceAttributes == nil || o.Spec.ResourceAttributes.Namespace != req.namespace {
			writeError(w, apierrors.NewBadRequest("spec.resourceAttributes.namespace must match namespace: "+req.namespace))
			return
		}
		if o.Status, err = authorize(req.store, o.Spec); err != nil {
			writeError(w, err)
			return
		}
	default:
		writeError(w, apierrors.NewInternalError(fmt.Errorf("%s is not a review", req.res.kind)))
		return
	}
	out, err := toUnstructured(req.res, obj)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.res.namespaced {
		out.SetNamespace(req.namespace)
	}
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	writeJSON(w, http.StatusCreated, out.Object)
}

// validateAccessSpec is kube-apiserver's rule: exactly one of
// resourceAttributes and nonResourceAttributes.
func validateAccessSpec(res *resource, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) error {
	spec := field.NewPath("spec")
	switch {
	case ra == nil && nra == nil:
		return apierrors.NewInvalid(res.gvk().GroupKind(), "", field.ErrorList{
			field.Invalid(spec.Child("resourceAttributes"), nil, "exactly one of nonResourceAttributes or resourceAttributes must be specified")})
	case ra != nil && nra != nil:
		return apierrors.NewInvalid(res.gvk().GroupKind(), "", field.ErrorList{
			field.Invalid(spec.Child("resourceAttributes"), ra, "cannot be specified in combination with nonResourceAttributes")})
	}
	return nil
}

func validateSubjectAccessReview(res *resource, spec authorizationv1.SubjectAccessReviewSpec) error {
	if err := validateAccessSpec(res, spec.ResourceAttributes, spec.NonResourceAttributes); err != nil {
		return err
	}
	if spec.User == "" && len(spec.Groups) == 0 {
		return apierrors.NewInvalid(res.gvk().GroupKind(), "", field.ErrorList{
			field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified")})
	}
	return nil
}

var (
	clusterRoles        = store.Resource{Group: rbacV1.Group, Resource: "clusterroles"}
	clusterRoleBindings = store.Resource{Group: rbacV1.Group, Resource: "clusterrolebindings"}
	roles               = store.Resource{Group: rbacV1.Group, Resource: "roles", Namespaced: true}
	roleBindings        = store.Resource{Group: rbacV1.Group, Resource: "rolebindings", Namespaced: true}
)

// authorize answers a SubjectAccessReview as kube-apiserver's authorizers
// (the system:masters group, then RBAC) would, from the RBAC objects in
// the cluster's store.
func authorize(s *store.Store, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	if slices.Contains(spec.Groups, groupMasters) {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}, nil
	}
	var wanted rbacv1.PolicyRule
	namespace := ""
	if ra := spec.ResourceAttributes; ra != nil {
		res := ra.Resource
		if ra.Subresource != "" {
			res += "/" + ra.Subresource
		}
		wanted = rbacv1.PolicyRule{Verbs: []string{ra.Verb}, APIGroups: []string{ra.Group}, Resources: []string{res}}
		if ra.Name != "" {
			wanted.ResourceNames = []string{ra.Name}
		}
		namespace = ra.Namespace
	} else {
		wanted = rbacv1.PolicyRule{Verbs: []string{spec.NonResourceAttributes.Verb}, NonResourceURLs: []string{spec.NonResourceAttributes.Path}}
	}
	bindings, err := bindingsOf(s, spec.User, spec.Groups, namespace)
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	for _, b := range bindings {
		// Non-resource rules count only when a ClusterRoleBinding grants them.
		if b.namespace != "" && spec.NonResourceAttributes != nil {
			continue
		}
		rules, err := rulesOf(s, b.roleRef, b.namespace)
		if err != nil {
			return authorizationv1.SubjectAccessReviewStatus{}, err
		}
		if ok, _ := rbacvalidation.Covers(rules, []rbacv1.PolicyRule{wanted}); ok {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: b.describe()}, nil
		}
	}
	return authorizationv1.SubjectAccessReviewStatus{}, nil
}

// rulesReview lists the RBAC rules that apply to the user in namespace.
func rulesReview(s *store.Store, u authenticationv1.UserInfo, namespace string) (authorizationv1.SubjectRulesReviewStatus, error) {
	status := authorizationv1.SubjectRulesReviewStatus{}
	bindings, err := bindingsOf(s, u.Username, u.Groups, namespace)
	if err != nil {
		return status, err
	}
	for _, b := range bindings {
		rules, err := rulesOf(s, b.roleRef, b.namespace)
		if err != nil {
			return status, err
		}
		for _, rule := range rules {
			if len(rule.NonResourceURLs) > 0 {
				if b.namespace == "" {
					status.NonResourceRules = append(status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
				}
				continue
			}
			status.ResourceRules = append(status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames,
			})
		}
	}
	return status, nil
}

// binding is a (Cluster)RoleBinding whose subjects include the user.
type binding struct {
	kind, name, namespace string
	roleRef               rbacv1.RoleRef
	subject               rbacv1.Subject
}

func (b binding) describe() string {
	where := ""
	if b.namespace != "" {
		where = fmt.Sprintf(" in namespace %q", b.namespace)
	}
	return fmt.Sprintf("RBAC: allowed by %s %q of %s %q to %s %q%s", b.kind, b.name, b.roleRef.Kind, b.roleRef.Name, b.subject.Kind, b.subject.Name, where)
}

// bindingsOf lists the ClusterRoleBindings and (in namespace) the
// RoleBindings that bind the user or one of its groups.
func bindingsOf(s *store.Store, user string, groups []string, namespace string) ([]binding, error) {
	var out []binding
	sources := []struct {
		res  store.Resource
		kind string
		ns   string
	}{{clusterRoleBindings, "ClusterRoleBinding", ""}}
	if namespace != "" {
		sources = append(sources, struct {
			res  store.Resource
			kind string
			ns   string
		}{roleBindings, "RoleBinding", namespace})
	}
	for _, src := range sources {
		items, _, err := s.List(src.res, src.ns, store.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, u := range items {
			rb := &rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rb); err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode %s %s: %w", src.kind, u.GetName(), err))
			}
			for _, sub := range rb.Subjects {
				if appliesTo(sub, user, groups, src.ns) {
					out = append(out, binding{kind: src.kind, name: rb.Name, namespace: src.ns, roleRef: rb.RoleRef, subject: sub})
					break
				}
			}
		}
	}
	return out, nil
}

// appliesTo is RBAC's subject match; a ServiceAccount subject of a
// RoleBinding without a namespace is of the binding's namespace.
func appliesTo(sub rbacv1.Subject, user string, groups []string, bindingNamespace string) bool {
	switch sub.Kind {
	case rbacv1.UserKind:
		return user != "" && sub.Name == user
	case rbacv1.GroupKind:
		return slices.Contains(groups, sub.Name)
	case rbacv1.ServiceAccountKind:
		ns := sub.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && user == "system:serviceaccount:"+ns+":"+sub.Name
	}
	return false
}

// rulesOf reads the rules of a binding's role; a ClusterRole with an
// aggregationRule has the rules of the ClusterRoles it selects (what
// kube-controller-manager's aggregation controller writes into it).
func rulesOf(s *store.Store, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	if ref.Kind == "Role" {
		u, err := s.Get(roles, namespace, ref.Name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		role := &rbacv1.Role{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode Role %s: %w", ref.Name, err))
		}
		return role.Rules, nil
	}
	u, err := s.Get(clusterRoles, "", ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cr := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cr); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode ClusterRole %s: %w", ref.Name, err))
	}
	rules := cr.Rules
	if cr.AggregationRule == nil {
		return rules, nil
	}
	all, _, err := s.List(clusterRoles, "", store.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, other := range all {
		if other.GetName() == cr.Name {
			continue
		}
		for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
			ls, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil || !ls.Matches(labels.Set(other.GetLabels())) {
				continue
			}
			o := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(other.Object, o); err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("failed to decode ClusterRole %s: %w", other.GetName(), err))
			}
			rules = append(rules, o.Rules...)
			break
		}
	}
	return rules, nil
}

// Service account tokens: JWTs shaped as kube-apiserver's (the same
// claims), signed with HMAC-SHA256 by a key of the Handler's own, so that
// a TokenReview of a token the Handler issued authenticates it as its
// service account. They are not accepted as credentials (the workload API
// authenticates by client certificate only) and a new process does not
// accept the last one's.
const (
	defaultTokenAudience   = "https://kubernetes.default.svc.cluster.local"
	defaultTokenExpiration = 3600
	minTokenExpiration     = 600
)

type tokenClaims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  []string `json:"aud"`
	Expiry    int64    `json:"exp"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	JTI       string   `json:"jti,omitempty"`
	K8s       struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

func (h *Handler) signToken(c tokenClaims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", apierrors.NewInternalError(fmt.Errorf("failed to encode the token claims: %w", err))
	}
	signed := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, h.tokenKey)
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// verifyToken returns the claims of a token this Handler signed that has
// not expired.
func (h *Handler) verifyToken(token string, now time.Time) (*tokenClaims, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != jwtHeader {
		return nil, false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, false
	}
	mac := hmac.New(sha256.New, h.tokenKey)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, false
	}
	c := &tokenClaims{}
	if err := json.Unmarshal(payload, c); err != nil || now.Unix() >= c.Expiry {
		return nil, false
	}
	return c, true
}

// reviewToken authenticates a token this Handler issued whose service
// account still exists (same uid), for the audiences asked (none: any).
func (h *Handler) reviewToken(s *store.Store, spec authenticationv1.TokenReviewSpec) authenticationv1.TokenReviewStatus {
	invalid := authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	c, ok := h.verifyToken(spec.Token, time.Now())
	if !ok {
		return invalid
	}
	sa, err := s.Get(serviceAccounts, c.K8s.Namespace, c.K8s.ServiceAccount.Name)
	if err != nil || string(sa.GetUID()) != c.K8s.ServiceAccount.UID {
		return invalid
	}
	audiences := c.Audience
	if len(spec.Audiences) > 0 {
		audiences = nil
		for _, a := range spec.Audiences {
			if slices.Contains(c.Audience, a) {
				audiences = append(audiences, a)
			}
		}
		if len(audiences) == 0 {
			return authenticationv1.TokenReviewStatus{Error: "token audiences don't match"}
		}
	}
	return authenticationv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     audiences,
		User: authenticationv1.UserInfo{
			Username: c.Subject,
			UID:      c.K8s.ServiceAccount.UID,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + c.K8s.Namespace, groupAuthenticated},
		},
	}
}

var serviceAccounts = store.Resource{Resource: "serviceaccounts", Namespaced: true}

// serviceAccountToken is serviceaccounts/token: a TokenRequest answered
// with a token for the service account.
func (h *Handler) serviceAccountToken(w http.ResponseWriter, r *http.Request, req *request) {
	_, body, err := decodeWrite(r)
	if err != nil {
		writeError(w, err)
		return
	}
	tokenRequest := requestKind(req)
	if err := checkKindOf(tokenRequest, body); err != nil {
		writeError(w, err)
		return
	}
	tr := &authenticationv1.TokenRequest{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, tr); err != nil {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the TokenRequest: %v", err)))
		return
	}
	sa, err := req.store.Get(serviceAccounts, req.namespace, req.name)
	if err != nil {
		writeError(w, err)
		return
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = ptr.To[int64](defaultTokenExpiration)
	}
	if *tr.Spec.ExpirationSeconds < minTokenExpiration {
		writeError(w, apierrors.NewInvalid(tokenRequest.GroupKind(), req.name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "expirationSeconds"), *tr.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes")}))
		return
	}
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = []string{defaultTokenAudience}
	}
	now := time.Now()
	exp := now.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)
	c := tokenClaims{
		Issuer: defaultTokenAudience, Subject: "system:serviceaccount:" + req.namespace + ":" + req.name,
		Audience: tr.Spec.Audiences, Expiry: exp.Unix(), IssuedAt: now.Unix(), NotBefore: now.Unix(),
	}
	c.K8s.Namespace = req.namespace
	c.K8s.ServiceAccount.Name = req.name
	c.K8s.ServiceAccount.UID = string(sa.GetUID())
	token, err := h.signToken(c)
	if err != nil {
		writeError(w, err)
		return
	}
	tr.Name, tr.Namespace, tr.CreationTimestamp = req.name, req.namespace, metav1.NewTime(now)
	tr.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tr)
	if err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("failed to encode the TokenRequest: %w", err)))
		return
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetGroupVersionKind(tokenRequest)
	writeJSON(w, http.StatusCreated, u.Object)
}
