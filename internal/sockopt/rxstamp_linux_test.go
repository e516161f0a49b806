package sockopt

import (
	"encoding/binary"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The kernel's receive stamp is read from a datagram's control messages
// in both layouts of a timespec; without one, the fallback stands.
func TestRxStamp(t *testing.T) {
	fallback := time.Unix(1, 0)
	cmsg := func(level, typ int32, data []byte) []byte {
		h := syscall.Cmsghdr{Level: level, Type: typ}
		h.SetLen(syscall.CmsgLen(len(data)))
		b := make([]byte, syscall.CmsgSpace(len(data)))
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&h)), syscall.SizeofCmsghdr))
		copy(b[syscall.CmsgLen(0):], data)
		return b
	}
	wide := binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, 1700000000), 123456789)
	narrow := binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, 1700000000), 123456789)
	for _, tc := range []struct {
		name string
		oob  []byte
		want time.Time
	}{
		{"64-bit timespec", cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, wide), time.Unix(1700000000, 123456789)},
		{"32-bit timespec", cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, narrow), time.Unix(1700000000, 123456789)},
		{"another message", cmsg(syscall.SOL_SOCKET, syscall.SCM_RIGHTS, narrow), fallback},
		{"none", nil, fallback},
		{"truncated", cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, wide)[:10], fallback},
	} {
		got, ok := RxStamp(tc.oob)
		if !ok {
			got = fallback
		}
		if !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
