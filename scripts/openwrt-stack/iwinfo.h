/*
 * sqmkit's declarations for building rpcd-mod-luci without libiwinfo
 * (scripts/openwrt-stack.sh): the test root has no wireless, so the module
 * finds no /usr/lib/libiwinfo.so at run time and never calls these. Only
 * the names and shapes its source refers to are declared; values are ours.
 */
#ifndef SQMKIT_IWINFO_DECLS_H
#define SQMKIT_IWINFO_DECLS_H
#include <stdint.h>
#include <glob.h>

#define IWINFO_BUFSIZE (24 * 1024)

enum { IWINFO_80211_COUNT = 8, IWINFO_HTMODE_COUNT = 16, IWINFO_AUTH_COUNT = 2,
	IWINFO_KMGMT_COUNT = 12, IWINFO_CIPHER_COUNT = 12 };
#define IWINFO_HTMODE_NOHT (1 << 0)
#define IWINFO_KMGMT_NONE (1 << 0)
#define IWINFO_CIPHER_NONE (1 << 0)

struct iwinfo_crypto_entry {
	uint8_t enabled, wpa_version;
	uint16_t group_ciphers, pair_ciphers;
	uint8_t auth_suites, auth_algs;
};

struct iwinfo_hardware_id {
	uint16_t vendor_id, device_id, subsystem_vendor_id, subsystem_device_id;
};

typedef int (*sqmkit_iw_num)(const char *, int *);
typedef int (*sqmkit_iw_str)(const char *, char *);

struct iwinfo_ops {
	sqmkit_iw_num channel, frequency, frequency_offset, txpower, txpower_offset, bitrate,
		signal, noise, quality, quality_max, mode, hwmodelist, htmodelist;
	sqmkit_iw_str ssid, bssid, country, hardware_id, hardware_name, encryption, phyname;
};
#endif
