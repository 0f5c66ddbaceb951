// Package deploy holds contractd's deployment kit (Dockerfile, kustomize
// base and overlay, systemd unit) and the tests that check it against the
// product: the manifests render and decode strictly into Kubernetes types,
// and agree with the config the pods run. It is its own module so that the
// Kubernetes libraries stay out of the product's dependencies.
package deploy
