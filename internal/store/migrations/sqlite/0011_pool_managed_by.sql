-- managed_by names the Kubernetes resource that manages a pool ("ClusterPool/dev"), empty for a
-- pool applied through the API: such a pool refuses PUT and DELETE /v1/pools/{name}, so that a
-- pool has one source of truth.
ALTER TABLE pools ADD COLUMN managed_by TEXT NOT NULL DEFAULT '';
