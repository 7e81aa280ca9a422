package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// adminFlags say how kaasctl reaches a broker's admin address: its URL
// (https:// for an admin address with TLS), the CAs its certificate is
// verified against, the name it is verified for, and the bearer token the
// broker asks for with --admin-auth-token-file.
type adminFlags struct {
	url, caFile, serverName, tokenFile string
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.url, "admin", "", "broker admin URL (http:// or https://) or HOST:PORT (http://, or https:// with --admin-ca-file or --admin-server-name)")
	fs.StringVar(&a.caFile, "admin-ca-file", os.Getenv("KAAS_ADMIN_CA_FILE"), "PEM CAs an https:// --admin certificate is verified against (KAAS_ADMIN_CA_FILE; default the system's)")
	fs.StringVar(&a.serverName, "admin-server-name", os.Getenv("KAAS_ADMIN_SERVER_NAME"), "name the https:// --admin certificate is verified for, e.g. the Service's name through a port-forward (KAAS_ADMIN_SERVER_NAME; default the URL's host)")
	fs.StringVar(&a.tokenFile, "admin-token-file", os.Getenv("KAAS_ADMIN_TOKEN_FILE"), "file holding the bearer token the broker's admin address asks for (KAAS_ADMIN_TOKEN_FILE)")
}

// adminClient asks one broker's admin address.
type adminClient struct {
	base  string
	http  *http.Client
	token string
}

// client checks the flags and readies the client.
func (a adminFlags) client() (*adminClient, error) {
	a.url = a.withScheme()
	u, err := url.Parse(a.url)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--admin %q is not an http:// or https:// URL", a.url)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // an admin address is reached directly, often through a port-forward
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.serverName}
		if a.caFile != "" {
			pem, err := os.ReadFile(a.caFile)
			if err != nil {
				return nil, fmt.Errorf("--admin-ca-file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--admin-ca-file %s holds no PEM certificate", a.caFile)
			}
		}
		tr.TLSClientConfig = cfg
	} else if a.caFile != "" || a.serverName != "" {
		return nil, fmt.Errorf("--admin-ca-file and --admin-server-name need an https:// --admin URL, not %s", a.url)
	}
	c := &adminClient{base: strings.TrimRight(a.url, "/"), http: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-token-file: %w", err)
		}
		if c.token = strings.TrimSpace(string(b)); c.token == "" {
			return nil, fmt.Errorf("--admin-token-file %s is empty", a.tokenFile)
		}
	}
	return c, nil
}

// withScheme is the --admin URL with http:// put before a bare host:port,
// or https:// when a TLS flag (--admin-ca-file, --admin-server-name) says
// the admin address speaks TLS.
func (a adminFlags) withScheme() string {
	if a.url == "" || strings.Contains(a.url, "://") {
		return a.url
	}
	if a.caFile != "" || a.serverName != "" {
		return "https://" + a.url
	}
	return "http://" + a.url
}

// getJSON decodes the JSON answer to GET path.
func (c *adminClient) getJSON(path string, v any) error {
	body, err := c.get(path)
	if err != nil {
		return err
	}
	defer body.Close()
	return json.NewDecoder(body).Decode(v)
}

// get is the body of a 200 answer to GET path.
func (c *adminClient) get(path string) (io.ReadCloser, error) {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var unknownCA x509.UnknownAuthorityError
		if errors.As(err, &unknownCA) {
			return nil, fmt.Errorf("%w (give --admin-ca-file with the CA that signed the broker's certificate)", err)
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("%s: %s: %s", req.URL, resp.Status, strings.TrimSpace(string(b)))
		if resp.StatusCode == http.StatusUnauthorized && c.token == "" {
			err = fmt.Errorf("%w (give --admin-token-file)", err)
		}
		return nil, err
	}
	return resp.Body, nil
}
