// Package dev is `capi-monolith dev`: a whole Cluster API management cluster
// from one binary, for a newcomer's first minutes and for the end-to-end
// suite.
//
// Start brings the environment up, in order:
//
//  1. etcd and kube-apiserver from the cached envtest binaries (package
//     controlplane), or an existing cluster given by a kubeconfig;
//  2. the CRDs of Cluster API core, kubeadm bootstrap and kubeadm control
//     plane (from the pinned module) and the modules' CRDs (embedded in the
//     binary; package crds);
//  3. a throwaway CA and serving certificate for loopback (package certs);
//  4. Cluster API's own managers (core, kubeadm bootstrap, kubeadm control
//     plane), each a supervised child process with its webhooks and
//     conversion (package capimanager), kube-controller-manager with only
//     its garbage collector and namespace controller, a supervised child
//     process too, when dev started its own apiserver (package
//     controllermanager), and, at the same time,
//     every enabled module of this binary in-process on one manager, with
//     its webhooks pointed at it (package webhooks);
//  5. an ExtensionConfig registering the runtime extension at the loopback
//     webhook server, when the runtimeext module is enabled.
//
// Stop undoes it all, children first; Command is the subcommand around it
// (flags, progress display, logs, Ctrl-C).
package dev
