//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The network allow-list works without giving the sandbox any way out of
// its network namespace. Stage one, which runs inside the namespace before
// anything of the program does, brings the namespace's loopback up and
// listens on 127.0.0.1:ProxyPort; every connection it accepts it hands, as
// a descriptor (SCM_RIGHTS), over a socket pair to capstan, where netProxy
// serves it from the host's network and reaches only the listed host:port
// pairs. The program gets HTTP(S)_PROXY pointing at that port and nothing
// else: its namespace has no other interface and no route, and Landlock
// (ABI 4 and later) lets it connect to that one port only.

// relayEnv tells stage one that fd 5 is the relay's socket pair.
const (
	relayEnv = "CAPSTAN_SANDBOX_RELAY"
	relayFD  = 5
)

// startRelay is stage one's half: it brings up lo, listens on the proxy
// port and passes every accepted connection to capstan. It returns once
// the listener is ready, so the program never finds the port closed.
func startRelay() error {
	syscall.CloseOnExec(relayFD)
	pair, err := net.FileConn(os.NewFile(relayFD, "relay"))
	if err != nil {
		return fmt.Errorf("relay socket: %w", err)
	}
	uc, ok := pair.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("relay socket is a %T", pair)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(ProxyPort))
	if err != nil {
		return fmt.Errorf("listen on the proxy port: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f, err := c.(*net.TCPConn).File()
			c.Close()
			if err != nil {
				continue
			}
			_, _, err = uc.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil)
			f.Close()
			if err != nil {
				return // capstan has gone: nothing can be served any more
			}
		}
	}()
	return nil
}

// loopbackUp sets the IFF_UP flag of lo in the current network namespace
// (the kernel then gives it 127.0.0.1 and ::1).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// relay is capstan's half: the socket pair end it reads descriptors from
// and the proxy that serves them.
type relay struct {
	parent *net.UnixConn
	child  *os.File
	proxy  *netProxy
	done   chan struct{}
}

// newRelay makes the socket pair and starts the proxy for allow. child is
// given to stage one as fd 5 and closed once the helper has started.
func newRelay(allow allowList) (*relay, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	pf := os.NewFile(uintptr(fds[0]), "relay-parent")
	pc, err := net.FileConn(pf)
	pf.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	r := &relay{parent: pc.(*net.UnixConn), child: os.NewFile(uintptr(fds[1]), "relay-child"), proxy: newNetProxy(allow), done: make(chan struct{})}
	go r.receive()
	return r, nil
}

// receive takes each connection stage one passes and serves it.
func (r *relay) receive() {
	defer close(r.done)
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := r.parent.ReadMsgUnix(buf, oob)
		if err != nil || (n == 0 && oobn == 0) {
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				f := os.NewFile(uintptr(fd), "sandbox-conn")
				c, err := net.FileConn(f)
				f.Close()
				if err != nil {
					continue
				}
				go r.proxy.Serve(c)
			}
		}
	}
}

// close ends the relay and the proxy, and every tunnel still open.
func (r *relay) close() {
	r.child.Close()
	r.parent.Close()
	<-r.done
	r.proxy.Close()
}
