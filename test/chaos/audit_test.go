package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// auditPolicy records every write request (Metadata level: who, what,
// which object, the response code) and nothing else, so that the log
// stays small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditLog is kube-apiserver's audit log file (--audit-log-path), which
// survives its restarts: the process appends to it.
var auditLog string

// auditFlags writes the policy into dir and returns the kube-apiserver
// flags that log writes to dir/audit.log.
func auditFlags(dir string) (map[string]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("failed to write the audit policy: %w", err)
	}
	auditLog = filepath.Join(dir, "audit.log")
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    auditLog,
		// One file for the whole run, written as events happen.
		"audit-log-mode":    "blocking",
		"audit-log-maxsize": "0",
	}, nil
}

// auditOffset is where the audit log ends now: writes logged from here
// on are the ones after this moment.
func auditOffset() (int64, error) {
	info, err := os.Stat(auditLog)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("failed to read the audit log: %w", err)
	}
	return info.Size(), nil
}

// managerWrites lists the write requests the manager (its user agent, see
// isManager) sent for objects in namespace
// since offset, each as "verb resource/name (code)", whatever their
// outcome: an attempted write to a paused cluster is a fault too. Events
// are not counted: they are about an object, not a write to it. total is
// how many writes of the manager the log holds since offset, anywhere:
// the evidence that the log sees the manager at all.
func managerWrites(offset int64, namespace string) (_ []string, total int, _ error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to read the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, 0, fmt.Errorf("failed to read the audit log: %w", err)
	}
	type event struct {
		Stage     string `json:"stage"`
		Verb      string `json:"verb"`
		UserAgent string `json:"userAgent"`
		ObjectRef *struct {
			Resource, Subresource, Namespace, Name string
		} `json:"objectRef"`
		ResponseStatus *struct {
			Code int `json:"code"`
		} `json:"responseStatus"`
	}
	var out []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var e event
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			// A line cut by a kill of the apiserver.
			continue
		}
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || !isManager(e.UserAgent) {
			continue
		}
		total++
		if e.ObjectRef.Namespace != namespace || e.ObjectRef.Resource == "events" {
			continue
		}
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		out = append(out, fmt.Sprintf("%s %s/%s (%d)", e.Verb, resource, e.ObjectRef.Name, code))
	}
	if err := scanner.Err(); err != nil {
		return nil, 0, fmt.Errorf("failed to read the audit log: %w", err)
	}
	return out, total, nil
}

// isManager reports whether a request's user agent is the manager's: the
// manager sets "capi-monolith" (manager.New); client-go's default would be
// the binary's name and version.
func isManager(userAgent string) bool {
	return userAgent == "capi-monolith" || strings.HasPrefix(userAgent, "capi-monolith/")
}
