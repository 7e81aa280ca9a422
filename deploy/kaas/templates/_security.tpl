{{/*
Listeners, TLS, SASL and the admin port's security. With broker.listeners
empty and nothing else set, every helper here renders nothing and the
chart is what it was: one PLAINTEXT listener on 9092.
*/}}

{{/* A listener's port name: lower case, dashes, at most 15 characters. */}}
{{- define "kaas.listenerPortName" -}}
{{- . | lower | replace "_" "-" | trunc 15 | trimSuffix "-" }}
{{- end }}

{{/* "true" when a listener speaks TLS. */}}
{{- define "kaas.hasTLSListener" -}}
{{- range .Values.broker.listeners }}{{ if has .protocol (list "SSL" "SASL_SSL") }}true{{ end }}{{ end }}
{{- end }}

{{/* "true" when a listener speaks SASL. */}}
{{- define "kaas.hasSASLListener" -}}
{{- range .Values.broker.listeners }}{{ if has .protocol (list "SASL_PLAINTEXT" "SASL_SSL") }}true{{ end }}{{ end }}
{{- end }}

{{/* The inter-broker listener's protocol; empty without broker.listeners
(or when it names none of them). */}}
{{- define "kaas.interBrokerProtocol" -}}
{{- $ib := default "PLAINTEXT" .Values.broker.interBrokerListener }}
{{- range .Values.broker.listeners }}{{ if eq .name $ib }}{{ .protocol }}{{ end }}{{ end }}
{{- end }}

{{/* "true" when the brokers authenticate each other by their certificates:
an SSL inter-broker listener that asks for client certificates. */}}
{{- define "kaas.interBrokerCertAuth" -}}
{{- if and (eq (include "kaas.interBrokerProtocol" .) "SSL") (ne .Values.tls.clientAuth "none") }}true{{ end }}
{{- end }}

{{/* The cert-manager Certificate's subject CN: tls.certManager.commonName,
else, when the brokers authenticate each other by certificate and no
mapping rules are set, the StatefulSet's name (the default mapping needs
a CN). */}}
{{- define "kaas.certCommonName" -}}
{{- if .Values.tls.certManager.commonName }}{{ .Values.tls.certManager.commonName }}
{{- else if and (include "kaas.interBrokerCertAuth" .) (not .Values.tls.principalMappingRules) }}{{ include "kaas.broker.fullname" . }}
{{- end }}
{{- end }}

{{/* "true" when the TLS Secret is mounted. */}}
{{- define "kaas.tlsEnabled" -}}
{{- if or .Values.tls.secretName .Values.tls.certManager.enabled }}true{{ end }}
{{- end }}

{{/* The TLS Secret's name. */}}
{{- define "kaas.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "kaas.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{/* Checks of the security values. */}}
{{- define "kaas.validateSecurity" -}}
{{- $b := .Values.broker }}
{{- $names := list }}
{{- $ports := list 9644 }}
{{- $portNames := list "admin" }}
{{- range $b.listeners }}
{{- if has .name $names }}{{ fail (printf "kaas: broker.listeners: the name %s is used twice" .name) }}{{ end }}
{{- if has (int .port) $ports }}{{ fail (printf "kaas: broker.listeners: port %v is used twice (9644 is the admin port)" .port) }}{{ end }}
{{- $pn := include "kaas.listenerPortName" .name }}
{{- if has $pn $portNames }}{{ fail (printf "kaas: broker.listeners: %s and another listener have the same port name %s" .name $pn) }}{{ end }}
{{- $names = append $names .name }}
{{- $ports = append $ports (int .port) }}
{{- $portNames = append $portNames $pn }}
{{- end }}
{{- if $b.listeners }}
{{- $ib := default "PLAINTEXT" $b.interBrokerListener }}
{{- $proto := include "kaas.interBrokerProtocol" . }}
{{- if not $proto }}{{ fail (printf "kaas: broker.interBrokerListener %s is not one of broker.listeners: name the listener brokers reach each other on" $ib) }}{{ end }}
{{- if has $proto (list "SASL_PLAINTEXT" "SASL_SSL") }}
{{- if not $b.interBrokerCredential.secretName }}{{ fail (printf "kaas: broker.interBrokerListener %s is %s: it needs broker.interBrokerCredential.secretName, the brokers' own user and password" $ib $proto) }}{{ end }}
{{- $mechs := splitList "," (upper $b.sasl.mechanisms) }}
{{- if not (has (upper $b.interBrokerCredential.mechanism) $mechs) }}{{ fail (printf "kaas: broker.interBrokerCredential.mechanism %s is not one of broker.sasl.mechanisms %s" $b.interBrokerCredential.mechanism $b.sasl.mechanisms) }}{{ end }}
{{- end }}
{{- else if $b.interBrokerListener }}
{{- fail "kaas: broker.interBrokerListener needs broker.listeners" }}
{{- end }}
{{- if and (include "kaas.hasTLSListener" .) (not (include "kaas.tlsEnabled" .)) }}
{{- fail "kaas: an SSL or SASL_SSL listener needs tls.secretName or tls.certManager.enabled" }}
{{- end }}
{{- if and $b.adminTLS (not (include "kaas.tlsEnabled" .)) }}
{{- fail "kaas: broker.adminTLS needs tls.secretName or tls.certManager.enabled" }}
{{- end }}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- fail "kaas: tls.certManager.enabled needs tls.certManager.issuerRef.name" }}
{{- end }}
{{- end }}

{{/* The listener environment: KAAS_LISTENERS and friends, or KAAS_LISTEN
and KAAS_ADVERTISE without broker.listeners. */}}
{{- define "kaas.listenerEnv" -}}
{{- $b := .Values.broker }}
{{- $self := printf "$(POD_NAME).%s.$(POD_NAMESPACE).svc.%s" (include "kaas.broker.headlessName" .) .Values.clusterDomain }}
{{- if $b.listeners }}
{{- $ls := list }}
{{- $map := list }}
{{- $adv := list }}
{{- range $b.listeners }}
{{- $ls = append $ls (printf "%s://0.0.0.0:%v" .name .port) }}
{{- $map = append $map (printf "%s:%s" .name .protocol) }}
{{- $adv = append $adv (printf "%s://%s:%v" .name (default $self .advertisedHost) (default .port .advertisedPort)) }}
{{- end }}
- name: KAAS_LISTENERS
  value: {{ join "," $ls | quote }}
- name: KAAS_LISTENER_SECURITY_PROTOCOL_MAP
  value: {{ join "," $map | quote }}
# Each broker's own addresses, per listener.
- name: KAAS_ADVERTISED_LISTENERS
  value: {{ join "," $adv | quote }}
{{- with $b.interBrokerListener }}
- name: KAAS_INTER_BROKER_LISTENER
  value: {{ . | quote }}
{{- end }}
{{- else }}
- name: KAAS_LISTEN
  value: {{ $b.listen | quote }}
# Each broker's own stable DNS name through the headless Service.
- name: KAAS_ADVERTISE
  value: "{{ $self }}:9092"
{{- end }}
{{- end }}

{{/* TLS, SASL and admin environment; nothing by default. */}}
{{- define "kaas.securityEnv" -}}
{{- $b := .Values.broker }}
{{- $t := .Values.tls }}
{{- if include "kaas.tlsEnabled" . }}
- name: KAAS_TLS_CERT_FILE
  value: /etc/kaas/tls/{{ $t.certKey }}
- name: KAAS_TLS_KEY_FILE
  value: /etc/kaas/tls/{{ $t.keyKey }}
{{- if ne $t.clientAuth "none" }}
- name: KAAS_TLS_CLIENT_CA_FILE
  value: /etc/kaas/tls/{{ $t.caKey }}
{{- end }}
- name: KAAS_TLS_CLIENT_AUTH
  value: {{ $t.clientAuth | quote }}
{{- with $t.principalMappingRules }}
- name: KAAS_TLS_PRINCIPAL_MAPPING_RULES
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if include "kaas.hasSASLListener" . }}
- name: KAAS_SASL_MECHANISMS
  value: {{ $b.sasl.mechanisms | quote }}
{{- end }}
{{- if has (include "kaas.interBrokerProtocol" .) (list "SSL" "SASL_SSL") }}
# The other brokers' certificates are verified against this CA.
- name: KAAS_INTER_BROKER_TLS_CA_FILE
  value: /etc/kaas/tls/{{ $t.caKey }}
{{- end }}
{{- with $b.superUsers }}
- name: KAAS_SUPER_USERS
  value: {{ . | quote }}
{{- end }}
{{- with $b.interBrokerCredential.secretName }}
# Expanded into --inter-broker-username in the arguments.
- name: BROKER_CREDENTIAL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $b.interBrokerCredential.usernameKey | quote }}
{{- end }}
{{- if $b.adminTLS }}
- name: KAAS_ADMIN_TLS_CERT_FILE
  value: /etc/kaas/tls/{{ $t.certKey }}
- name: KAAS_ADMIN_TLS_KEY_FILE
  value: /etc/kaas/tls/{{ $t.keyKey }}
{{- end }}
{{- if $b.adminAuthTokenSecret.name }}
- name: KAAS_ADMIN_AUTH_TOKEN_FILE
  value: /etc/kaas/admin-token/{{ $b.adminAuthTokenSecret.key }}
{{- end }}
{{- if $b.adminPprof }}
- name: KAAS_ADMIN_PPROF
  value: "true"
{{- end }}
{{- end }}

{{/* Arguments for the broker credential; nothing by default. */}}
{{- define "kaas.securityArgs" -}}
{{- $saslIB := has (include "kaas.interBrokerProtocol" .) (list "SASL_PLAINTEXT" "SASL_SSL") }}
{{- with .Values.broker.interBrokerCredential }}
{{- if .secretName }}
{{- if $saslIB }}
- --inter-broker-sasl-mechanism={{ .mechanism }}
{{- end }}
- --inter-broker-username=$(BROKER_CREDENTIAL_USERNAME)
- --inter-broker-password-file=/etc/kaas/broker-credential/{{ .passwordKey }}
{{- end }}
{{- end }}
{{- end }}

{{/* Secret volume mounts (read-only, whole Secrets: a subPath mount would
never see a rotation); nothing by default. */}}
{{- define "kaas.securityMounts" -}}
{{- if include "kaas.tlsEnabled" . }}
- name: tls
  mountPath: /etc/kaas/tls
  readOnly: true
{{- end }}
{{- if .Values.broker.interBrokerCredential.secretName }}
- name: broker-credential
  mountPath: /etc/kaas/broker-credential
  readOnly: true
{{- end }}
{{- if .Values.broker.adminAuthTokenSecret.name }}
- name: admin-token
  mountPath: /etc/kaas/admin-token
  readOnly: true
{{- end }}
{{- end }}

{{/* The Secret volumes; nothing by default. */}}
{{- define "kaas.securityVolumes" -}}
{{- if include "kaas.tlsEnabled" . }}
- name: tls
  secret:
    secretName: {{ include "kaas.tlsSecretName" . | quote }}
{{- end }}
{{- with .Values.broker.interBrokerCredential.secretName }}
- name: broker-credential
  secret:
    secretName: {{ . | quote }}
{{- end }}
{{- with .Values.broker.adminAuthTokenSecret.name }}
- name: admin-token
  secret:
    secretName: {{ . | quote }}
{{- end }}
{{- end }}

{{/* The brokers' Kafka ports (container or Service: with service, each
has port and targetPort). */}}
{{- define "kaas.kafkaPorts" -}}
{{- $service := .service }}
{{- if .ctx.Values.broker.listeners }}
{{- range .ctx.Values.broker.listeners }}
- name: {{ include "kaas.listenerPortName" .name }}
  {{- if $service }}
  port: {{ .port }}
  targetPort: {{ include "kaas.listenerPortName" .name }}
  {{- else }}
  containerPort: {{ .port }}
  {{- end }}
  protocol: TCP
{{- end }}
{{- else }}
- name: kafka
  {{- if $service }}
  port: 9092
  targetPort: kafka
  {{- else }}
  containerPort: 9092
  {{- end }}
  protocol: TCP
{{- end }}
{{- end }}
