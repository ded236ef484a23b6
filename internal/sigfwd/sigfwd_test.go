package sigfwd

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestNotify holds wherever the package builds, with or without the C
// relay: a signal sent to the process reaches the channel once Ready.
func TestNotify(t *testing.T) {
	c := make(chan os.Signal, 4)
	r := Notify(c)
	defer r.Stop()
	<-r.Ready()
	for _, s := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGTERM} {
		if err := syscall.Kill(os.Getpid(), s); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-c:
			if got != s {
				t.Fatalf("got %v, want %v", got, s)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%v never reached the channel", s)
		}
	}
}
