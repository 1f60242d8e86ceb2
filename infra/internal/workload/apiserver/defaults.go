package apiserver

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The defaults kube-apiserver's decoding sets on the kinds clients read
// back most (k8s.io/kubernetes' SetDefaults_* of apps/v1 and core/v1,
// written here from what its answers show): a Deployment's strategy,
// revisionHistoryLimit, progressDeadlineSeconds and replicas, and a Pod's
// (or a Deployment's Pod template's) policies, scheduler, grace period and
// containers' termination message and image pull policy. Applied on
// create; a kind not listed is stored as written.

// defaultBuiltin sets the defaults of obj's kind, if it has any listed.
func defaultBuiltin(res *resource, obj *unstructured.Unstructured) {
	switch {
	case res.gv == appsV1 && res.name == "deployments":
		withTyped(obj, func(d *appsv1.Deployment) {
			if d.Spec.Replicas == nil {
				d.Spec.Replicas = ptr.To[int32](1)
			}
			if d.Spec.Strategy.Type == "" {
				d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
			}
			if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
				if d.Spec.Strategy.RollingUpdate == nil {
					d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
				}
				quarter := intstr.FromString("25%")
				if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
					d.Spec.Strategy.RollingUpdate.MaxUnavailable = &quarter
				}
				if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
					d.Spec.Strategy.RollingUpdate.MaxSurge = &quarter
				}
			}
			if d.Spec.RevisionHistoryLimit == nil {
				d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
			}
			if d.Spec.ProgressDeadlineSeconds == nil {
				d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
			}
			defaultPodSpec(&d.Spec.Template.Spec)
		})
	case res.gv == coreV1 && res.name == "pods":
		withTyped(obj, func(p *corev1.Pod) { defaultPodSpec(&p.Spec) })
	}
}

func defaultPodSpec(s *corev1.PodSpec) {
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			c := &cs[i]
			if c.TerminationMessagePath == "" {
				c.TerminationMessagePath = corev1.TerminationMessagePathDefault
			}
			if c.TerminationMessagePolicy == "" {
				c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
			}
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = imagePullPolicy(c.Image)
			}
		}
	}
}

// imagePullPolicy is Always for an image without a tag or tagged latest,
// else IfNotPresent (a digest counts as a tag).
func imagePullPolicy(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	if i < 0 || name[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// withTyped runs fn on obj decoded into T and writes the result back; an
// object that does not decode is left as it is (typed() reports it).
func withTyped[T any](obj *unstructured.Unstructured, fn func(*T)) {
	var t T
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &t) != nil {
		return
	}
	fn(&t)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t)
	if err != nil {
		return
	}
	obj.Object = m
}
