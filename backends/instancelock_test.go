package backends_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kunobi-ninja/kobe/backends"
)

// Calls on one instance wait for each other; calls on another instance do not.
func TestInstanceLocks(t *testing.T) {
	var locks backends.InstanceLocks
	unlock := locks.Lock("a")

	var second atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer locks.Lock("a")()
		second.Store(true)
	}()
	otherUnlock := locks.Lock("b") // does not wait for a
	otherUnlock()
	time.Sleep(20 * time.Millisecond)
	assert.False(t, second.Load(), "a second caller on the same instance waits")
	unlock()
	<-done
	assert.True(t, second.Load())
}
