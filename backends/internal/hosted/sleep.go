package hosted

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kunobi-ninja/kobe/backends"
)

// Sleep and resume of a hosted instance (k3s, k0s): its StatefulSets are scaled to 0, so that
// no server or agent pod is left and the host's compute is freed, and back to the replicas the
// instance was created with. The cluster's state must outlive its pods: it does when the
// servers keep their data directory on a PersistentVolumeClaim (spec.cluster.persistence
// storageType pvc) or their datastore is the instance's database on a shared datastore
// (spec.backend.datastore). With an emptyDir and no shared datastore the state would go with
// the pods, so such an instance refuses to sleep (backends.ErrSleepRefused).

var (
	_ backends.Sleeper          = (*Backend)(nil)
	_ backends.SleepRequirement = (*Backend)(nil)
)

// sleepingAnnotation on the CA Secret: the instance sleeps (kobe scaled it to 0); the value is
// since when. Status reads it: a sleeping instance is Sleeping, not Unhealthy.
const sleepingAnnotation = "kobe.kunobi.ninja/sleeping-since"

// sleepNeeds is what keeps an instance's state while it sleeps.
const sleepNeeds = "spec.cluster.persistence.storageType pvc, or spec.backend.datastore"

// SleepRequirement implements backends.SleepRequirement.
func (b *Backend) SleepRequirement() string { return sleepNeeds }

// SleepsWith implements backends.SleepRequirement: the options keep the servers' data on
// claims, or name a shared datastore.
func (b *Backend) SleepsWith(options json.RawMessage) bool {
	p, err := ParseOptions(b.section(), options)
	return err == nil && (p.StorageType == StoragePVC || p.SharedDatastore != nil)
}

// sleepRefusal says why an instance cannot sleep without losing its state ("": it can): its
// servers keep their data on an emptyDir (no claim template) and it has no shared datastore.
func sleepRefusal(distro string, shape instanceShape, servers *appsv1.StatefulSet) string {
	if shape.Datastore != nil || len(servers.Spec.VolumeClaimTemplates) > 0 {
		return ""
	}
	return fmt.Sprintf("this %s instance keeps its data on an emptyDir and has no shared datastore: scaling it to 0 would lose its state (sleep needs %s)",
		distro, sleepNeeds)
}

// scalePatch is the merge patch of a StatefulSet scaled to replicas. The claims are retained
// when scaled down (the servers' data directories are what a sleep keeps; kobe's own objects
// delete them when scaled, and Delete removes them by label either way).
func scalePatch(replicas int32, retainClaims bool) []byte {
	spec := map[string]any{"replicas": replicas}
	if retainClaims {
		spec["persistentVolumeClaimRetentionPolicy"] = map[string]string{
			"whenScaled": string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType),
		}
	}
	patch, _ := json.Marshal(map[string]any{"spec": spec})
	return patch
}

// sleepingPatch sets (since non-empty) or removes the CA Secret's sleeping annotation.
func sleepingPatch(since string) []byte {
	var value any // null removes the annotation in a merge patch
	if since != "" {
		value = since
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{sleepingAnnotation: value}}})
	return patch
}

// Sleep implements backends.Sleeper: the instance is marked sleeping, its servers' StatefulSet
// (and its agents') scaled to 0 with their claims retained, and Sleep returns once no pod of
// the instance is left (or ctx ends). Sleeping a sleeping instance succeeds. An instance whose
// state would not survive refuses, changing nothing.
func (b *Backend) Sleep(ctx context.Context, id string) error {
	ca, shape, unlock, err := b.lockedAnchor(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	servers, err := b.kube.AppsV1().StatefulSets(ca.Namespace).Get(ctx, serverSetName(id), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("StatefulSet %s/%s: %w", ca.Namespace, serverSetName(id), err)
	}
	if why := sleepRefusal(b.distro.Name, shape, servers); why != "" {
		return fmt.Errorf("%w: %s", backends.ErrSleepRefused, why)
	}
	if _, asleep := ca.Annotations[sleepingAnnotation]; !asleep {
		since := time.Now().UTC().Format(time.RFC3339)
		if _, err := b.kube.CoreV1().Secrets(ca.Namespace).Patch(ctx, ca.Name, types.MergePatchType, sleepingPatch(since), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("marking instance %s sleeping: %w", id, err)
		}
	}
	if err := b.scale(ctx, ca.Namespace, setsOf(id, shape), 0); err != nil {
		return err
	}
	return b.waitNoPods(ctx, ca)
}

// Resume implements backends.Sleeper: the StatefulSets go back to the replicas the instance
// was created with and the sleeping mark is removed; the caller waits for readiness with
// WaitReady (every pod Ready and the instance's API answering, as after Create). Resuming an
// awake instance changes nothing.
func (b *Backend) Resume(ctx context.Context, id string) error {
	ca, shape, unlock, err := b.lockedAnchor(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	want := map[string]int32{serverSetName(id): int32(shape.Servers)}
	if shape.Agents > 0 {
		want[agentSetName(id)] = int32(shape.Agents)
	}
	for _, name := range setsOf(id, shape) {
		if _, err := b.kube.AppsV1().StatefulSets(ca.Namespace).Patch(ctx, name, types.MergePatchType, scalePatch(want[name], false), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling StatefulSet %s/%s to %d: %w", ca.Namespace, name, want[name], err)
		}
	}
	if _, asleep := ca.Annotations[sleepingAnnotation]; asleep {
		if _, err := b.kube.CoreV1().Secrets(ca.Namespace).Patch(ctx, ca.Name, types.MergePatchType, sleepingPatch(""), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("marking instance %s awake: %w", id, err)
		}
	}
	return nil
}

// lockedAnchor takes the instance's lock and finds its CA Secret (its anchor) and shape; the
// caller unlocks when done (on an error nothing is held).
func (b *Backend) lockedAnchor(ctx context.Context, id string) (*corev1.Secret, instanceShape, func(), error) {
	if err := b.available(); err != nil {
		return nil, instanceShape{}, nil, err
	}
	unlock := b.locks.Lock(id)
	ca, err := b.findCA(ctx, id)
	if err != nil {
		unlock()
		return nil, instanceShape{}, nil, err
	}
	return ca, shapeOf(ca), unlock, nil
}

// setsOf names an instance's StatefulSets: its servers', and its agents' when it has agents.
func setsOf(id string, shape instanceShape) []string {
	sets := []string{serverSetName(id)}
	if shape.Agents > 0 {
		sets = append(sets, agentSetName(id))
	}
	return sets
}

func (b *Backend) scale(ctx context.Context, ns string, sets []string, replicas int32) error {
	for _, name := range sets {
		_, err := b.kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, scalePatch(replicas, true), metav1.PatchOptions{})
		if err != nil && !(apierrors.IsNotFound(err) && name != sets[0]) {
			return fmt.Errorf("scaling StatefulSet %s/%s to %d: %w", ns, name, replicas, err)
		}
	}
	return nil
}

// waitNoPods returns once no server or agent pod of the instance is left, or ctx ends.
func (b *Backend) waitNoPods(ctx context.Context, ca *corev1.Secret) error {
	id := ca.Labels[LabelInstance]
	sel := metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s in (%s,%s)", LabelInstance, id, LabelComponent, ComponentServer, ComponentAgent)}
	for {
		pods, err := b.kube.CoreV1().Pods(ca.Namespace).List(ctx, sel)
		var left []string
		if err == nil {
			for _, p := range pods.Items {
				left = append(left, p.Name)
			}
			if len(left) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				sort.Strings(left)
				err = fmt.Errorf("pods still there: %s", strings.Join(left, ", "))
			}
			return fmt.Errorf("instance %s did not stop: %v: %w", id, err, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}

// shapeOf reads what the instance was created from (its CA Secret's annotation).
func shapeOf(ca *corev1.Secret) instanceShape {
	var shape instanceShape
	_ = json.Unmarshal([]byte(ca.Annotations[shapeAnnotation]), &shape)
	if shape.Servers == 0 {
		shape.Servers = 1
	}
	return shape
}
