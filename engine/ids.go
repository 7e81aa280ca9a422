package engine

import "encoding/base64"

func base64URL(b []byte) string { return base64.URLEncoding.EncodeToString(b) }
