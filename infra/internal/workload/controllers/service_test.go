package controllers

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func service(name string, spec corev1.ServiceSpec) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       spec,
	}
}

func TestServicesGetClusterIPsAndEndpointsOfReadyPods(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	e.create(deployments, deployment("web", 3, "nginx"))
	port := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}
	e.create(services, service("web", corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: port}))
	e.create(services, service("web-np", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"}, Ports: port}))
	e.create(services, service("web-headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"}, Ports: port}))
	e.create(services, service("web-lb", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"}, Ports: port}))

	svcNet := netip.MustParsePrefix(svcCIDR)
	e.g.Eventually(func(g Gomega) {
		a, err := get[corev1.Service](e, services, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		b, err := get[corev1.Service](e, services, testNS, "web-np")()
		g.Expect(err).NotTo(HaveOccurred())
		h, err := get[corev1.Service](e, services, testNS, "web-headless")()
		g.Expect(err).NotTo(HaveOccurred())
		for _, s := range []*corev1.Service{a, b} {
			g.Expect(s.Spec.ClusterIP).NotTo(BeEmpty())
			g.Expect(svcNet.Contains(netip.MustParseAddr(s.Spec.ClusterIP))).To(BeTrue(), s.Spec.ClusterIP)
			g.Expect(s.Spec.ClusterIPs).To(Equal([]string{s.Spec.ClusterIP}))
			g.Expect(s.Spec.IPFamilies).To(Equal([]corev1.IPFamily{corev1.IPv4Protocol}))
			g.Expect(s.Spec.Ports[0].Protocol).To(Equal(corev1.ProtocolTCP))
		}
		g.Expect(a.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		g.Expect(a.Spec.ClusterIP).NotTo(Equal(b.Spec.ClusterIP))
		g.Expect(b.Spec.Ports[0].NodePort).To(BeNumerically(">=", nodePortFirst))
		g.Expect(b.Spec.Ports[0].NodePort).To(BeNumerically("<=", nodePortLast))
		g.Expect(h.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		lb, err := get[corev1.Service](e, services, testNS, "web-lb")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lb.Spec.Ports[0].NodePort).NotTo(BeZero())
		g.Expect(lb.Status.LoadBalancer.Ingress).To(ConsistOf(HaveField("IP", "10.0.0.11"), HaveField("IP", "10.0.0.12"), HaveField("IP", "10.0.0.13")))

		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		var ips []string
		for _, p := range ps {
			g.Expect(p).To(Satisfy(runningReady))
			ips = append(ips, p.Status.PodIP)
		}
		g.Expect(ips).To(HaveLen(3))

		ep, err := get[corev1.Endpoints](e, endpoints, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ep.Subsets).To(HaveLen(1))
		var epIPs []string
		for _, a := range ep.Subsets[0].Addresses {
			epIPs = append(epIPs, a.IP)
		}
		g.Expect(epIPs).To(ConsistOf(ips))
		g.Expect(ep.Subsets[0].Ports).To(ConsistOf(HaveField("Port", BeEquivalentTo(8080))))

		slices, err := list[discoveryv1.EndpointSlice](e, endpointSlices, testNS, map[string]string{discoveryv1.LabelServiceName: "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(slices).To(HaveLen(1))
		sl := slices[0]
		g.Expect(sl.AddressType).To(Equal(discoveryv1.AddressTypeIPv4))
		g.Expect(sl.Labels).To(HaveKeyWithValue(managedByLabel, managedByController))
		g.Expect(metav1.GetControllerOf(sl)).NotTo(BeNil())
		var slIPs []string
		for _, ep := range sl.Endpoints {
			g.Expect(ptr.Deref(ep.Conditions.Ready, false)).To(BeTrue())
			slIPs = append(slIPs, ep.Addresses...)
		}
		g.Expect(slIPs).To(ConsistOf(ips))
		g.Expect(sl.Ports).To(ConsistOf(HaveField("Port", HaveValue(BeEquivalentTo(8080)))))
	}, wait, interval).Should(Succeed())

	// Scaled to zero: the endpoints empty.
	update(e, deployments, testNS, "web", func(d *appsv1Deployment) { d.Spec.Replicas = ptr.To[int32](0) })
	e.g.Eventually(func(g Gomega) {
		ep, err := get[corev1.Endpoints](e, endpoints, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ep.Subsets).To(BeEmpty())
		slices, err := list[discoveryv1.EndpointSlice](e, endpointSlices, testNS, map[string]string{discoveryv1.LabelServiceName: "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(slices).To(HaveLen(1))
		g.Expect(slices[0].Endpoints).To(BeEmpty())
	}, wait, interval).Should(Succeed())

	// A deleted Service's Endpoints go with it.
	_, _, err := e.s.Delete(services, testNS, "web", store.Preconditions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Eventually(func() error { _, err := e.s.Get(endpoints, testNS, "web"); return err }, wait, interval).Should(Satisfy(isGone))
}

func TestClaimsBindToMatchingOrProvisionedVolumes(t *testing.T) {
	e := newEnv(t, Options{})
	e.create(storageClasses, &storageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{defaultClassAnnotation: "true"}}, Provisioner: "rancher.io/local-path"})
	// A volume a person made, of the default class and big enough.
	e.create(volumes, &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "static"},
		Spec: corev1.PersistentVolumeSpec{StorageClassName: "standard", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resourceMust("5Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
	})
	claim := func(name, size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceMust(size)}}},
		}
	}
	e.create(claims, claim("small", "1Gi"))
	e.g.Eventually(func(g Gomega) {
		pvc, err := get[corev1.PersistentVolumeClaim](e, claims, testNS, "small")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		g.Expect(ptr.Deref(pvc.Spec.StorageClassName, "")).To(Equal("standard"))
		g.Expect(pvc.Spec.VolumeName).To(Equal("static"))
		pv, err := get[corev1.PersistentVolume](e, volumes, "", "static")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pv.Status.Phase).To(Equal(corev1.VolumeBound))
		g.Expect(pv.Spec.ClaimRef.Name).To(Equal("small"))
	}, wait, interval).Should(Succeed())

	// No volume left that fits: one is provisioned.
	created := e.create(claims, claim("big", "10Gi"))
	pvName := "pvc-" + string(created.GetUID())
	e.g.Eventually(func(g Gomega) {
		pvc, err := get[corev1.PersistentVolumeClaim](e, claims, testNS, "big")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		g.Expect(pvc.Spec.VolumeName).To(Equal(pvName))
		g.Expect(pvc.Status.Capacity.Storage().String()).To(Equal("10Gi"))
		pv, err := get[corev1.PersistentVolume](e, volumes, "", pvName)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pv.Status.Phase).To(Equal(corev1.VolumeBound))
		g.Expect(pv.Spec.PersistentVolumeReclaimPolicy).To(Equal(corev1.PersistentVolumeReclaimDelete))
		g.Expect(pv.Annotations).To(HaveKeyWithValue(provisionedByAnnotation, "rancher.io/local-path"))
	}, wait, interval).Should(Succeed())

	// Deleting the claims: the provisioned volume goes, the retained one is Released.
	for _, n := range []string{"big", "small"} {
		_, _, err := e.s.Delete(claims, testNS, n, store.Preconditions{})
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	e.g.Eventually(func() error { _, err := e.s.Get(volumes, "", pvName); return err }, wait, interval).Should(Satisfy(isGone))
	e.g.Eventually(get[corev1.PersistentVolume](e, volumes, "", "static"), wait, interval).Should(HaveField("Status.Phase", corev1.VolumeReleased))
}
