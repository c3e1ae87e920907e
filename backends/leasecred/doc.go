// Package leasecred owns a lease's credential, from the instance to kobe's store and back:
//
//   - prepare (holder.go): when an instance becomes Ready, its one holder, ServiceAccount
//     kube-system/kobe-lease-holder bound to cluster-admin, and a token of it
//     (backends.PreparedCredential); RevokeHolder deletes both at the lease's end.
//   - mint, seal, store (prepared.go): the prepared credential sealed for the store (bound to
//     its instance), and a warm-bound lease's kubeconfig minted from it (Mint, Ensure). It is
//     what makes a warm bind cost no call to the instance; the API server and the workers both
//     use it. Nothing it stores can sign: a leaked row is one instance's holder, never the
//     instance's CA.
//   - issue and revoke a per-lease certificate (leasecred.go): for a lease bound the slow way
//     by a backend that reaches its instances as an admin.
//
// The backends call the parts that talk to an instance (Prepare, RevokeHolder, Issue, Revoke);
// the instance, lease and server packages the parts that seal and store.
package leasecred
