package apiserver

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// maxBodyBytes is kube-apiserver's limit on request bodies.
const maxBodyBytes = 3 * 1024 * 1024

// maxConflictRetries bounds the retries of a read-modify-write that the
// client did not make conditional, as kube-apiserver's GuaranteedUpdate retries.
const maxConflictRetries = 10

func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to read the request body: %v", err))
	}
	if len(body) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	return body, nil
}

func unsupportedMediaType(contentType string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json (got %q)", contentType),
	}}
}

// decodeWrite reads what every write with a body needs: the dryRun
// options of its query and the object in its body.
func decodeWrite(r *http.Request) ([]store.WriteOption, *unstructured.Unstructured, error) {
	wo, err := dryRun(r.URL.Query()["dryRun"])
	if err != nil {
		return nil, nil, err
	}
	obj, err := decodeObject(r)
	if err != nil {
		return nil, nil, err
	}
	return wo, obj, nil
}

// decodeObject reads an object body: JSON, or protobuf (client-go's
// typed clients send built-in kinds as protobuf). Responses are JSON
// whatever the request's encoding; clients read the response's Content-Type.
func decodeObject(r *http.Request) (*unstructured.Unstructured, error) {
	ct := r.Header.Get("Content-Type")
	mt := "application/json"
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return nil, unsupportedMediaType(ct)
		}
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	switch mt {
	case "application/json":
		return decodeJSONObject(body)
	case runtime.ContentTypeProtobuf:
		return decodeProtobuf(body)
	default:
		return nil, unsupportedMediaType(ct)
	}
}

func decodeProtobuf(body []byte) (*unstructured.Unstructured, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		return nil, unsupportedMediaType(runtime.ContentTypeProtobuf)
	}
	obj, gvk, err := info.Serializer.Decode(body, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the protobuf object: %v", err))
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to convert the protobuf object: %v", err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(*gvk)
	return u, nil
}

func decodeJSONObject(body []byte) (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if err := utiljson.Unmarshal(body, &obj); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the object: %v", err))
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// checkKind refuses an object of another kind than the resource's, and
// fills apiVersion and kind when the client left them out.
func checkKind(res *resource, obj *unstructured.Unstructured) error {
	if obj.GetAPIVersion() == "" {
		obj.SetAPIVersion(res.gv.String())
	}
	if obj.GetKind() == "" {
		obj.SetKind(res.kind)
	}
	if obj.GetAPIVersion() != res.gv.String() || obj.GetKind() != res.kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the object is a %s %s, the request is for %s %s",
			obj.GetAPIVersion(), obj.GetKind(), res.gv.String(), res.kind))
	}
	return nil
}

// typed decodes an object into its client-go type: what kube-apiserver's
// decoding does, refusing wrongly typed fields with a 400.
func typed(res *resource, obj *unstructured.Unstructured) (runtime.Object, error) {
	if res.custom != nil {
		out := res.custom.decode(obj)
		out.SetGroupVersionKind(res.gvk())
		return out, nil
	}
	out, err := scheme.Scheme.New(res.gvk())
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to make a %s: %w", res.kind, err))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the %s: %v", res.kind, err))
	}
	out.GetObjectKind().SetGroupVersionKind(res.gvk())
	return out, nil
}

func toUnstructured(res *resource, obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the %s: %w", res.kind, err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(res.gvk())
	return u, nil
}

// fieldManagerName is the request's fieldManager, or as kube-apiserver does
// the User-Agent up to its first slash.
func fieldManagerName(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua := strings.Split(r.Header.Get("User-Agent"), "/")[0]
	var b strings.Builder
	for _, c := range ua {
		if unicode.IsPrint(c) && b.Len() < 128 {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// dryRun reads the dryRun parameter (All is its one valid value) into
// the store's write options.
func dryRun(values []string) ([]store.WriteOption, error) {
	switch {
	case len(values) == 0:
		return nil, nil
	case len(values) == 1 && values[0] == metav1.DryRunAll:
		return []store.WriteOption{store.DryRun()}, nil
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid dryRun %v: the supported value is All", values))
}

// checkUnknownFields applies the request's fieldValidation to the fields of
// obj its type does not have: Strict refuses them (400), Warn (the default,
// as in kube-apiserver) answers with a Warning header per field, Ignore says
// nothing. Stored objects never keep them: the typed round trip drops them.
func checkUnknownFields(w http.ResponseWriter, r *http.Request, res *resource, obj *unstructured.Unstructured) error {
	mode := r.URL.Query().Get("fieldValidation")
	switch mode {
	case metav1.FieldValidationIgnore:
		return nil
	case "", metav1.FieldValidationWarn, metav1.FieldValidationStrict:
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("fieldValidation %q is not one of Ignore, Warn, Strict", mode))
	}
	if res.custom != nil {
		return checkCustomUnknownFields(w, mode, res, obj)
	}
	out, err := scheme.Scheme.New(res.gvk())
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to make a %s: %w", res.kind, err))
	}
	err = runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, out, true)
	strict, ok := runtime.AsStrictDecodingError(err)
	if !ok {
		// Wrongly typed fields are typed()'s 400.
		return nil
	}
	if mode == metav1.FieldValidationStrict {
		return apierrors.NewBadRequest(fmt.Sprintf("strict decoding error: %v", strict))
	}
	for _, e := range strict.Errors() {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", e.Error()))
	}
	return nil
}
