package lease

// ConditionInstanceHealthy is False once the lease's instance failed its health checks.
const ConditionInstanceHealthy = "InstanceHealthy"
