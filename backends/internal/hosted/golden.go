package hosted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/datastore"
)

// Golden templates on the hosted backends (backends.GoldenTemplater), the local backend's
// design: Provision (instance.EnsureGoldenTemplate) has a builder instance created and its
// addons applied, then calls FreezeGoldenTemplate, which stops the builder's servers and
// copies its database into the pool's template (datastore.FreezeTemplate); the builder is then
// deleted. A member created with spec.Golden gets a copy of the template as its database.
//
// Identity. k3s keeps its servers' bootstrap data in the datastore, under /bootstrap/<hash of
// the token>: the CA certificates and keys, the service-account signing key, the request-header
// CA, the token file and the secrets-encryption configuration, encrypted with the token. A
// template keeps none of it (Distro.TemplateWithout): a member, with its own token and the CA
// kobe made for it, finds no bootstrap data, so its first server bootstraps afresh (a new
// service-account key; kobe's CA from its data directory) and saves its own. k3s's serving
// certificate (the Secret kube-system/k3s-serving, signed by the builder's CA) is left out
// too: each member signs its own. So a member trusts nothing of the builder's nor of another
// member's: their admin certificates and ServiceAccount tokens are refused by each other.
//
// Nodes. The builder's servers (unless --disable-agent) and agents registered Nodes named
// after its pods, which no member has: a template keeping them would give every member
// NotReady phantom nodes next to its own, with the builder's pods bound to them. The template
// leaves out, for the builder's nodes (builderNodes, read from its database), what
// Distro.TemplateWithout lists: for k3s the Nodes, their Leases, CSINodes and node-password
// Secrets, every pod and every EndpointSlice (see k3s.go). The controllers of a member make the
// pods again on its own nodes.
//
// The templates of a pool are listed in a ConfigMap of the host cluster (goldenListName, in the
// members' namespace, with where each template's datastore is, never its URL), so that a new
// generation drops the pool's other ones and the pool's last member made from a template drops
// them all, exactly, never by a name prefix that could match another pool.

// ComponentGolden labels a pool's list of golden templates.
const ComponentGolden = "golden"

// deletingAnnotation on the CA Secret: Delete has begun. A member being deleted no longer
// counts as one that still needs the pool's templates (members deleted at once, a pool
// drained, must not each keep the templates for the other).
const deletingAnnotation = "kobe.kunobi.ninja/deleting"

// goldenListKey is the ConfigMap's key of the list (JSON of []goldenEntry).
const goldenListKey = "templates"

// goldenEntry is one template of a pool: its id (datastore.Name derives its database's name)
// and the operator's Secret that reaches its datastore.
type goldenEntry struct {
	ID        string `json:"id"`
	SecretRef string `json:"secretRef"`
	SecretKey string `json:"secretKey"`
}

// goldenListName is the ConfigMap of a pool's templates: the pool's name is a DNS label (it is
// in every object's labels), so the name is a valid one.
func goldenListName(pool string) string { return "kobe-golden-" + pool }

// Golden reports whether the options ask for golden templates (nil: no datastore, no).
func (d *DatastoreOptions) Golden() bool {
	return d != nil && d.GoldenTemplates != nil && *d.GoldenTemplates
}

// goldenSpec parses a spec that asks for golden templates of a given generation.
func (b *Backend) goldenSpec(spec backends.InstanceSpec) (Parsed, error) {
	if spec.Golden == "" {
		return Parsed{}, errors.New("no golden template generation given")
	}
	// A template is the pool's, not a member's: its spec is checked under the builder's id
	// (the caller's spec may carry a member's id, or none).
	spec.ID = backends.GoldenBuilderID(spec)
	p, _, err := b.validate(spec)
	if err != nil {
		return p, err
	}
	if !p.SharedDatastore.Golden() {
		return p, backends.InvalidSpec(errors.New("spec.backend.datastore.goldenTemplates: not set: the pool has no golden template"))
	}
	if err := b.available(); err != nil {
		return p, err
	}
	return p, nil
}

func (b *Backend) goldenServer(ctx context.Context, p Parsed) (*datastore.Server, datastoreRef, error) {
	ref := datastoreRef{SecretRef: p.SharedDatastore.SecretRef, SecretKey: p.SharedDatastore.Key()}
	s, err := b.datastoreServer(ctx, p.Namespace, ref)
	return s, ref, err
}

// GoldenTemplateReady implements backends.GoldenTemplater.
func (b *Backend) GoldenTemplateReady(ctx context.Context, spec backends.InstanceSpec) (bool, error) {
	p, err := b.goldenSpec(spec)
	if err != nil {
		return false, err
	}
	s, _, err := b.goldenServer(ctx, p)
	if err != nil {
		return false, err
	}
	return s.TemplateReady(ctx, backends.GoldenTemplateID(spec))
}

// FreezeGoldenTemplate implements backends.GoldenTemplater: the builder's servers stop (their
// StatefulSets are deleted and their pods waited for: nothing writes the database any more),
// its database is copied into the template without the distribution's identity keys, and the
// pool's templates of other generations are dropped. The builder's other objects and its
// database go with its Delete, which the caller does.
func (b *Backend) FreezeGoldenTemplate(ctx context.Context, builderID string, spec backends.InstanceSpec) error {
	p, err := b.goldenSpec(spec)
	if err != nil {
		return err
	}
	s, ref, err := b.goldenServer(ctx, p)
	if err != nil {
		return err
	}
	if err := b.stopServers(ctx, builderID); err != nil {
		return fmt.Errorf("stopping the golden builder %s: %w", builderID, err)
	}
	id := backends.GoldenTemplateID(spec)
	// Listed before it exists: a crash in the copy leaves an entry that the pool's drop finds.
	if err := b.updateGoldenList(ctx, p.Namespace, spec.Pool, func(list []goldenEntry) []goldenEntry {
		for _, e := range list {
			if e.ID == id {
				return list
			}
		}
		return append(list, goldenEntry{ID: id, SecretRef: ref.SecretRef, SecretKey: ref.SecretKey})
	}); err != nil {
		return err
	}
	if b.distro.TemplateWithout == nil {
		// Every distribution that allows goldenTemplates says what its template leaves out.
		return fmt.Errorf("%s: golden templates are not supported (no TemplateWithout)", b.distro.Name)
	}
	nodes, err := builderNodes(ctx, s, builderID)
	if err != nil {
		return err
	}
	if err := s.FreezeTemplate(ctx, builderID, id, b.distro.TemplateWithout(nodes)...); err != nil {
		return err
	}
	return b.dropGoldenTemplates(ctx, p.Namespace, spec.Pool, id)
}

// nodeKeyPrefix is where the API server keeps Node objects in the datastore ("minions", the
// resource's old name, which its storage kept).
const nodeKeyPrefix = "/registry/minions/"

// builderNodes are the names of the nodes the golden builder registered (its servers with an
// agent, its agents), read from its stopped database: what the template must not keep.
func builderNodes(ctx context.Context, s *datastore.Server, builderID string) ([]string, error) {
	keys, err := s.TemplateKeys(ctx, builderID, nodeKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of the golden builder %s: %w", builderID, err)
	}
	nodes := make([]string, 0, len(keys))
	for _, k := range keys {
		nodes = append(nodes, strings.TrimPrefix(k, nodeKeyPrefix))
	}
	return nodes, nil
}

// stopServers deletes the instance's StatefulSets and waits until none of its pods is left.
func (b *Backend) stopServers(ctx context.Context, id string) error {
	ca, err := b.findCA(ctx, id)
	if err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	for _, name := range []string{serverSetName(id), agentSetName(id)} {
		err := b.kube.AppsV1().StatefulSets(ca.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting StatefulSet %s/%s: %w", ca.Namespace, name, err)
		}
	}
	grace := int64(1)
	for {
		pods, err := b.kube.CoreV1().Pods(ca.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInstance + "=" + id})
		if err != nil {
			return fmt.Errorf("listing the pods of %s: %w", id, err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp == nil {
				_ = b.kube.CoreV1().Pods(ca.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods of %s still there: %w", len(pods.Items), id, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}

// readGoldenList returns a pool's list and the ConfigMap holding it (nil: none).
func (b *Backend) readGoldenList(ctx context.Context, ns, pool string) ([]goldenEntry, *corev1.ConfigMap, error) {
	cm, err := b.kube.CoreV1().ConfigMaps(ns).Get(ctx, goldenListName(pool), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, goldenListName(pool), err)
	}
	var list []goldenEntry
	if err := json.Unmarshal([]byte(cm.Data[goldenListKey]), &list); err != nil {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s: %w", ns, cm.Name, err)
	}
	return list, cm, nil
}

// updateGoldenList changes a pool's list (created when absent, deleted when emptied), again
// on a conflict with another worker's change.
func (b *Backend) updateGoldenList(ctx context.Context, ns, pool string, change func([]goldenEntry) []goldenEntry) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		list, cm, err := b.readGoldenList(ctx, ns, pool)
		if err != nil {
			return err
		}
		list = change(list)
		data, _ := json.Marshal(list)
		cms := b.kube.CoreV1().ConfigMaps(ns)
		switch {
		case cm == nil && len(list) == 0:
			return nil
		case cm == nil:
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: goldenListName(pool), Namespace: ns,
					Labels: map[string]string{LabelPool: pool, LabelBackend: b.distro.Name, LabelComponent: ComponentGolden}},
				Data: map[string]string{goldenListKey: string(data)},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), goldenListName(pool), err)
			}
		case len(list) == 0:
			rv := cm.ResourceVersion
			err = cms.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		default:
			cm.Data = map[string]string{goldenListKey: string(data)}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		return err
	})
}

// dropGoldenTemplates drops the pool's templates but keep ("": all of them) and takes them off
// its list; one that cannot be dropped stays listed for the next try.
func (b *Backend) dropGoldenTemplates(ctx context.Context, ns, pool, keep string) error {
	list, _, err := b.readGoldenList(ctx, ns, pool)
	if err != nil {
		return err
	}
	dropped := map[string]bool{}
	var dropErr error
	for _, e := range list {
		if e.ID == keep {
			continue
		}
		s, err := b.datastoreServer(ctx, ns, datastoreRef{SecretRef: e.SecretRef, SecretKey: e.SecretKey})
		if err == nil {
			err = s.Drop(ctx, e.ID)
		}
		if err != nil {
			dropErr = errors.Join(dropErr, fmt.Errorf("golden template %s: %w", e.ID, err))
			continue
		}
		dropped[e.ID] = true
	}
	err = b.updateGoldenList(ctx, ns, pool, func(list []goldenEntry) []goldenEntry {
		var out []goldenEntry
		for _, e := range list {
			if !dropped[e.ID] {
				out = append(out, e)
			}
		}
		return out
	})
	return errors.Join(dropErr, err)
}

// dropGoldenIfLast drops every template of the pool of ca's instance when it was made from
// one and no other member made from one remains (members being deleted do not count): the
// pool is going, or shrinking to nothing; its next member builds the template again.
func (b *Backend) dropGoldenIfLast(ctx context.Context, ca *corev1.Secret) error {
	var shape instanceShape
	_ = json.Unmarshal([]byte(ca.Annotations[shapeAnnotation]), &shape)
	if shape.Template == "" {
		return nil
	}
	pool := ca.Labels[LabelPool]
	list, err := b.kube.CoreV1().Secrets(ca.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelComponent + "=" + ComponentCA + "," + LabelBackend + "=" + b.distro.Name + "," + LabelPool + "=" + pool})
	if err != nil {
		return fmt.Errorf("listing the members of pool %s: %w", pool, err)
	}
	for _, other := range list.Items {
		if other.Name == ca.Name || other.DeletionTimestamp != nil {
			continue
		}
		if _, deleting := other.Annotations[deletingAnnotation]; deleting {
			continue
		}
		var s instanceShape
		_ = json.Unmarshal([]byte(other.Annotations[shapeAnnotation]), &s)
		if s.Template != "" {
			return nil
		}
	}
	return b.dropGoldenTemplates(ctx, ca.Namespace, pool, "")
}

// markDeleting annotates the instance's CA Secret (see deletingAnnotation), before anything of
// the instance is deleted.
func (b *Backend) markDeleting(ctx context.Context, id string) error {
	ca, err := b.findCA(ctx, id)
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := ca.Annotations[deletingAnnotation]; ok {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{deletingAnnotation: time.Now().UTC().Format(time.RFC3339)}}})
	_, err = b.kube.CoreV1().Secrets(ca.Namespace).Patch(ctx, ca.Name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking Secret %s/%s as deleting: %w", ca.Namespace, ca.Name, err)
	}
	return nil
}

// checkGolden is the golden part of the datastore's preflight: the datastore can copy a
// database (not NATS).
func checkGolden(d *DatastoreOptions, s *datastore.Server) error {
	if !d.Golden() || s.SupportsTemplates() {
		return nil
	}
	return backends.InvalidSpec(fmt.Errorf("spec.backend.datastore.goldenTemplates: the %s datastore cannot copy a database with kine's revisions (a key-value bucket has no copy that keeps them): use PostgreSQL or MySQL/MariaDB, or no goldenTemplates", s.Driver()))
}

// GoldenListName is the ConfigMap of a pool's golden templates (tests check it is gone).
func GoldenListName(pool string) string { return goldenListName(pool) }
