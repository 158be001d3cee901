package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// MaxCABundleBytes bounds a CA bundle file.
const MaxCABundleBytes = 1 << 20

// CAFile reads the setting name as the path of a PEM bundle of CA certificates and returns
// them as the only roots a TLS client trusts; nil when the setting is unset. An unreadable
// file, one over MaxCABundleBytes, or one without a certificate fails.
func (l *Loader) CAFile(name string) *x509.CertPool {
	p := l.String(name, "", false)
	if p == "" {
		return nil
	}
	pool, err := ReadCABundle(p)
	if err != nil {
		l.Fail(name, "%v", err)
		return nil
	}
	return pool
}

// ReadCABundle reads a PEM file of CA certificates into a pool (only these are trusted).
func ReadCABundle(path string) (*x509.CertPool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxCABundleBytes {
		return nil, fmt.Errorf("%s is %d bytes; a CA bundle is at most %d", path, st.Size(), MaxCABundleBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d does not parse: %v", path, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
