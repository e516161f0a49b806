// Package onpath answers, for a test or a tune run on the router, whether
// its traffic takes a queue's path: the kernel routes the server's address
// out of the queue's device or one stacked on it (Queue), and during each
// loaded phase the queue's shaper counted what the test moved (Check). A
// speed test that is not on the path grades another link: the LuCI tune
// page once measured the wrong WAN and blamed Wi-Fi.
package onpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Route is the device the kernel sends a packet to addr out of: one
// RTM_GETROUTE, as `ip route get` asks (policy routing by mark aside).
func Route(addr netip.Addr) (string, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", addr, err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return "", fmt.Errorf("route to %s: %w", addr, err)
	}
	addr = addr.Unmap()
	family, bits := syscall.AF_INET, 32
	if addr.Is6() {
		family, bits = syscall.AF_INET6, 128
	}
	dst := addr.AsSlice()
	attrLen := syscall.SizeofRtAttr + len(dst)
	msgLen := syscall.NLMSG_HDRLEN + syscall.SizeofRtMsg + attrLen
	b := make([]byte, msgLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(msgLen))
	ne.PutUint16(b[4:], syscall.RTM_GETROUTE)
	ne.PutUint16(b[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(b[8:], 1) // sequence
	rt := b[syscall.NLMSG_HDRLEN:]
	rt[0], rt[1] = byte(family), byte(bits) // rtm_family, rtm_dst_len
	a := rt[syscall.SizeofRtMsg:]
	ne.PutUint16(a[0:], uint16(attrLen))
	ne.PutUint16(a[2:], syscall.RTA_DST)
	copy(a[syscall.SizeofRtAttr:], dst)
	if err := syscall.Sendto(fd, b, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return "", fmt.Errorf("route to %s: %w", addr, err)
	}
	buf := make([]byte, 8192)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", addr, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", addr, err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := int32(ne.Uint32(m.Data)); e != 0 {
					return "", fmt.Errorf("route to %s: %w", addr, syscall.Errno(-e))
				}
			}
		case syscall.RTM_NEWROUTE:
			attrs, err := syscall.ParseNetlinkRouteAttr(&m)
			if err != nil {
				return "", fmt.Errorf("route to %s: %w", addr, err)
			}
			for _, at := range attrs {
				if at.Attr.Type == syscall.RTA_OIF && len(at.Value) >= 4 {
					ifi, err := net.InterfaceByIndex(int(ne.Uint32(at.Value)))
					if err != nil {
						return "", fmt.Errorf("route to %s: %w", addr, err)
					}
					return ifi.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("route to %s: %w", addr, errors.New("the kernel named no device"))
}
