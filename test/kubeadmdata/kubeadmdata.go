package kubeadmdata

// JoinWorker is cloud-config for a worker's kubeadm join (Secret key
// "value", format "cloud-config").
const JoinWorker = `## template: jinja
#cloud-config
write_files:
- path: /run/kubeadm/kubeadm-join-config.yaml
  owner: root:root
  permissions: '0640'
  content: |
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: JoinConfiguration
    discovery:
      bootstrapToken:
        apiServerEndpoint: 127.0.0.1:6443
        token: abcdef.0123456789abcdef
        unsafeSkipCAVerification: true
    nodeRegistration:
      name: '{{ ds.meta_data.local_hostname }}'
runcmd:
- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml
`
