# Sieve (Dovecot Pigeonhole, Cyrus): file mail that spamnb tagged as spam (X-Spam-Flag: YES,
# added by the milter, spamc or `spamnb filter` before delivery) into the Junk folder, and
# very sure spam (ten stars or more in X-Spam-Level) straight to Trash.
require ["fileinto", "mailbox"];

if header :contains "X-Spam-Level" "**********" {
    fileinto :create "Trash";
    stop;
}
if header :is "X-Spam-Flag" "YES" {
    fileinto :create "Junk";
    stop;
}
