// Package envtest is the one shared way test suites start a real
// kube-apiserver and etcd with Cluster API's CRDs installed.
//
// A suite starts one Environment in TestMain and gives every test its own
// namespace:
//
//	func TestMain(m *testing.M) {
//		ctrl.SetLogger(envtest.TestLogger())
//		env, err := envtest.Start(context.Background(), envtest.Options{
//			CRDDirectoryPaths: []string{"../../manifests/infra/crd"},
//		})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		if err := env.Stop(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		os.Exit(code)
//	}
//
// The binaries are the ones built by `make envtest-assets`: KUBEBUILDER_ASSETS
// wins when it is set, otherwise the project's cache folder is used (see
// BinaryAssetsDirectory). Cluster API's CRDs are read from the pinned
// sigs.k8s.io/cluster-api module in the Go module cache (see ClusterAPIModule),
// so no network is needed.
//
// Environment.RestartAPIServer stops kube-apiserver and starts it again on
// the same etcd, address and certificates, for suites that test what a
// restarted apiserver does to their clients (test/chaos); Options.
// APIServerFlags passes extra kube-apiserver flags (a shorter
// request-timeout makes such a stop quick, audit-log-path logs requests).
//
// The package sets no global state: suites hand TestLogger to
// ctrl.SetLogger themselves (CAPI_MONOLITH_TEST_LOGS=1 turns the logs on).
package envtest
