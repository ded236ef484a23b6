package openshell

// The watch fan-out: every WatchSandboxes stream has a FIFO that the
// driver's own mutations publish into (under the sandbox's lock, so in
// order), and that the stream's own looks at the store fill in between.

import (
	"context"
	"os"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// watchItem is one observed state of a sandbox; sandbox nil means gone.
type watchItem struct {
	id      string
	sandbox *pb.DriverSandbox
}

// watchQueue is one WatchSandboxes stream's FIFO of observed states, in
// the order they were observed.
type watchQueue struct {
	mu    sync.Mutex
	items []watchItem
	wake  chan struct{} // capacity 1
}

func (q *watchQueue) push(it watchItem) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *watchQueue) take() []watchItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// publish hands the current state of sandbox id (gone if it has no
// record) to every watcher. The caller holds id's lock, so every state a
// mutation passes through (Starting, Deleting) reaches every stream, in
// order: watchers only observe a sandbox themselves while they hold its
// lock (see WatchSandboxes).
func (d *Driver) publish(id string) {
	sb, err := d.snapshot(context.Background(), id, false)
	if err != nil {
		sb = nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for q := range d.watchers {
		q.push(watchItem{id: id, sandbox: sb})
	}
}

// notify makes every watcher look for changes now.
func (d *Driver) notify() {
	d.mu.Lock()
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

func (d *Driver) changes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// watch is WatchSandboxes: it sends the stream's events with send until
// ctx ends (nil) or send or a look at the store fails.
func (d *Driver) watch(ctx context.Context, send func(*pb.WatchSandboxesEvent) error) error {
	q := &watchQueue{wake: make(chan struct{}, 1)}
	d.mu.Lock()
	d.watchers[q] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.watchers, q)
		d.mu.Unlock()
	}()
	seen := map[string]*pb.DriverSandbox{}
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	look := func() error {
		ents, err := os.ReadDir(d.sandboxesDir())
		if err != nil {
			return status.Errorf(codes.Internal, "list sandboxes: %v", err)
		}
		ids := map[string]bool{}
		for _, e := range ents {
			ids[e.Name()] = true
		}
		for id := range seen {
			ids[id] = true
		}
		sorted := make([]string, 0, len(ids))
		for id := range ids {
			sorted = append(sorted, id)
		}
		sort.Strings(sorted)
		for _, id := range sorted {
			unlock, ok := d.tryRLock(id)
			if !ok {
				continue // a mutation is under way: it publishes its states
			}
			sb, err := d.snapshot(ctx, id, false)
			if err != nil {
				sb = nil
			}
			q.push(watchItem{id: id, sandbox: sb})
			unlock()
		}
		return nil
	}
	flush := func() error {
		for _, it := range q.take() {
			prev, ok := seen[it.id]
			switch {
			case it.sandbox == nil && ok:
				delete(seen, it.id)
				if err := send(&pb.WatchSandboxesEvent{Payload: &pb.WatchSandboxesEvent_Deleted{Deleted: &pb.WatchSandboxesDeletedEvent{SandboxId: it.id}}}); err != nil {
					return err
				}
			case it.sandbox == nil, ok && proto.Equal(prev, it.sandbox):
			default:
				seen[it.id] = it.sandbox
				if err := send(&pb.WatchSandboxesEvent{Payload: &pb.WatchSandboxesEvent_Sandbox{Sandbox: &pb.WatchSandboxesSandboxEvent{Sandbox: it.sandbox}}}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for {
		changed := d.changes()
		if err := look(); err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-q.wake:
				if err := flush(); err != nil {
					return err
				}
			case <-changed:
				waiting = false
			case <-tick.C:
				waiting = false
			}
		}
	}
}
