package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// block runs until its context ends, and reports how it ended on ended.
func block(ended chan<- error) func(context.Context, func(string)) ([]byte, bool, error) {
	return func(ctx context.Context, _ func(string)) ([]byte, bool, error) {
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, false, ctx.Err()
	}
}

func quick(ctx context.Context, set func(string)) ([]byte, bool, error) {
	set("almost")
	return []byte(`{"content":[]}`), false, nil
}

func startOK(t *testing.T, s *taskStore, owner string, run func(context.Context, func(string)) ([]byte, bool, error)) taskView {
	t.Helper()
	v, err := s.start(context.Background(), owner, time.Minute, run)
	if err != nil {
		t.Fatalf("start for %s: %v", owner, err)
	}
	return v
}

// waitStatus waits, bounded, for owner's task id to have status want, or
// to be gone when want is "".
func waitStatus(t *testing.T, s *taskStore, owner, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := s.get(owner, id)
		if want == "" && errors.Is(err, errTaskNotFound) || err == nil && v.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %+v, %v; want status %q", id, v, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTaskStoreBoundsRunningTasksPerCallerAndInAll(t *testing.T) {
	s := newTaskStore(2, 3, time.Hour, time.Second)
	defer s.close()
	ended := make(chan error, 10)
	a1 := startOK(t, s, "a", block(ended))
	startOK(t, s, "a", block(ended))
	if _, err := s.start(context.Background(), "a", time.Minute, block(ended)); !errors.Is(err, errTooManyTasks) {
		t.Fatalf("a's third task: %v, want errTooManyTasks", err)
	}
	startOK(t, s, "b", block(ended)) // another caller is not held by a's cap
	if _, err := s.start(context.Background(), "c", time.Minute, block(ended)); !errors.Is(err, errTooManyTasks) {
		t.Fatalf("the fourth task in all: %v, want errTooManyTasks", err)
	}
	// Cancelling one of a's makes room, for a and in all.
	if v, err := s.cancelTask("a", a1.TaskID); err != nil || v.Status != taskCancelled {
		t.Fatalf("cancel: %+v %v", v, err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled task's context ended with %v", err)
	}
	if _, err := s.cancelTask("a", a1.TaskID); !errors.Is(err, errTaskTerminal) {
		t.Fatalf("cancelling a finished task: %v, want errTaskTerminal", err)
	}
	startOK(t, s, "a", block(ended))
	s.close()
	for range 3 {
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("close ended a task with %v", err)
		}
	}
	if _, err := s.start(context.Background(), "d", time.Minute, quick); !errors.Is(err, errTooManyTasks) {
		t.Fatalf("a task after close: %v", err)
	}
}

func TestTaskStoreKeepsBoundedFinishedTasks(t *testing.T) {
	s := newTaskStore(2, 2, time.Hour, time.Second)
	defer s.close()
	var ids []string
	for range 5 {
		v := startOK(t, s, "a", quick)
		waitStatus(t, s, "a", v.TaskID, taskCompleted)
		ids = append(ids, v.TaskID)
	}
	// perCaller finished tasks are kept, the newest.
	if l := s.list("a"); len(l) != 2 || l[0].TaskID != ids[3] || l[1].TaskID != ids[4] {
		t.Fatalf("a keeps %+v, want its last two", l)
	}
	// In all at most 2*total.
	for _, owner := range []string{"b", "c", "d", "e"} {
		v := startOK(t, s, owner, quick)
		waitStatus(t, s, owner, v.TaskID, taskCompleted)
	}
	if n := s.live(); n != 4 {
		t.Fatalf("the store keeps %d tasks, want 2*total = 4", n)
	}
}

func TestTaskStoreDropsTasksWhenTheirLifetimeEnds(t *testing.T) {
	s := newTaskStore(4, 4, time.Hour, time.Second)
	s.minTTL = time.Millisecond
	defer s.close()
	ended := make(chan error, 1)
	run, err := s.start(context.Background(), "a", 50*time.Millisecond, block(ended))
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.start(context.Background(), "a", 50*time.Millisecond, quick)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the expired task's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a running task outlived its lifetime")
	}
	waitStatus(t, s, "a", run.TaskID, "")
	waitStatus(t, s, "a", done.TaskID, "")
	if n := s.live(); n != 0 {
		t.Fatalf("%d tasks kept past their lifetime", n)
	}
	// Room again: nothing counts against the caller.
	startOK(t, s, "a", quick)
}

func TestTaskStoreHidesOtherCallersTasks(t *testing.T) {
	s := newTaskStore(4, 4, time.Hour, time.Second)
	defer s.close()
	v := startOK(t, s, "a", quick)
	waitStatus(t, s, "a", v.TaskID, taskCompleted)
	if _, err := s.get("b", v.TaskID); !errors.Is(err, errTaskNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := s.cancelTask("b", v.TaskID); !errors.Is(err, errTaskNotFound) {
		t.Errorf("cancel: %v", err)
	}
	if _, _, _, err := s.result(context.Background(), "b", v.TaskID); !errors.Is(err, errTaskNotFound) {
		t.Errorf("result: %v", err)
	}
	if l := s.list("b"); len(l) != 0 {
		t.Errorf("list: %+v", l)
	}
	got, res, rpcErr, err := s.result(context.Background(), "a", v.TaskID)
	if err != nil || rpcErr != nil || string(res) != `{"content":[]}` || got.Status != taskCompleted || got.StatusMessage != "almost" {
		t.Errorf("the owner's result: %+v %s %v %v", got, res, rpcErr, err)
	}
}

func TestTaskStoreClampsTTL(t *testing.T) {
	s := newTaskStore(1, 1, time.Hour, time.Second)
	defer s.close()
	ms := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		in   *float64
		want time.Duration
	}{
		{nil, time.Hour},
		{ms(0), time.Hour},
		{ms(-5), time.Hour},
		{ms(1e300), time.Hour},
		{ms(10), time.Second},
		{ms(90000), 90 * time.Second},
	} {
		if got := s.clampTTL(tc.in); got != tc.want {
			t.Errorf("ttl %v: %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestTaskIDsAreRandom(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := newTaskID()
		if err != nil || len(id) != 22 || seen[id] {
			t.Fatalf("id %q %v", id, err)
		}
		seen[id] = true
	}
}

// TestTaskStoreLetsAnonymousCallersShareByID: behind a gateway without
// auth, every request comes from a replica's address, and a task started
// through one replica is polled through another. An anonymous task is
// reached by its id from any address, never by a verified caller's or a
// session's key, and a verified caller's task never by an anonymous one.
func TestTaskStoreLetsAnonymousCallersShareByID(t *testing.T) {
	s := newTaskStore(4, 8, time.Hour, time.Second)
	defer s.close()
	anon := startOK(t, s, "addr:10.0.0.1", quick)
	waitStatus(t, s, "addr:10.0.0.1", anon.TaskID, taskCompleted)
	if _, err := s.get("addr:10.0.0.2", anon.TaskID); err != nil {
		t.Errorf("another address's get of an anonymous task: %v", err)
	}
	for _, other := range []string{"subject:alice", "session:s1"} {
		if _, err := s.get(other, anon.TaskID); !errors.Is(err, errTaskNotFound) {
			t.Errorf("%s's get of an anonymous task: %v, want not found", other, err)
		}
	}
	theirs := startOK(t, s, "subject:alice", quick)
	if _, err := s.get("addr:10.0.0.1", theirs.TaskID); !errors.Is(err, errTaskNotFound) {
		t.Errorf("an anonymous get of alice's task: %v, want not found", err)
	}
	if l := s.list("addr:10.0.0.2"); len(l) != 0 {
		t.Errorf("another address lists %d tasks, want its own only (0)", len(l))
	}
}
