package wire

import "strings"

// zoneKey marks a client's zone inside its client.id, the convention
// zone-aware Kafka services share: "kaas_az=us-east-1a", alone or among
// other comma- or space-separated parts ("app-7,kaas_az=us-east-1a").
const zoneKey = "kaas_az="

// clientZone returns the zone a client.id names, or "" if it names none.
// The zone runs from after the key to the next separator (',', ';', space
// or tab); the first key wins. A key only counts at the start of the
// client.id or after a separator, so "xkaas_az=a" names no zone.
func clientZone(clientID string) string {
	for rest := clientID; ; {
		i := strings.Index(rest, zoneKey)
		if i < 0 {
			return ""
		}
		if i > 0 && !isZoneSep(rest[i-1]) {
			rest = rest[i+len(zoneKey):]
			continue
		}
		v := rest[i+len(zoneKey):]
		if j := strings.IndexFunc(v, func(r rune) bool { return r < 0x80 && isZoneSep(byte(r)) }); j >= 0 {
			v = v[:j]
		}
		return v
	}
}

func isZoneSep(c byte) bool { return c == ',' || c == ';' || c == ' ' || c == '\t' }
