package plan

import (
	"fmt"
	"hash/fnv"

	"github.com/sqmkit/sqmkit/internal/config"
)

// maxIfName is the longest Linux interface name (IFNAMSIZ 16 minus the NUL).
const maxIfName = 15

// IFBName returns the IFB device that shapes iface's download under backend
// b: "ifb4<iface>" (the sqm-scripts name) for cake and fq_codel, and
// "ifb@<iface>" (the NSS scripts' name, which NSS users already type) for
// nss. A name that would exceed 15 bytes becomes the 4-byte prefix, the
// first 7 bytes of iface and 4 hex digits of the FNV-1a hash of the whole
// iface: exactly 15 bytes, stable across runs, recognisable in `ip link`,
// and distinct for interfaces that share their first 7 bytes (barring a
// 1-in-65536 hash collision).
func IFBName(iface string, b config.Backend) string {
	prefix := "ifb4"
	if b == config.NSS {
		prefix = "ifb@"
	}
	if len(prefix)+len(iface) <= maxIfName {
		return prefix + iface
	}
	h := fnv.New32a()
	h.Write([]byte(iface))
	return fmt.Sprintf("%s%s%04x", prefix, iface[:maxIfName-len(prefix)-4], h.Sum32()&0xffff)
}
