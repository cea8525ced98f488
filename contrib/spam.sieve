# Sieve (Dovecot Pigeonhole, Cyrus): file mail that spamnb tagged as spam (X-Spam-Flag: YES,
# added by the milter, spamc or `spamnb filter` before delivery) into the Junk folder, where
# the user sees it and a message moved out of it teaches spamnb (contrib/dovecot).
#
# Spam scores well above the spam threshold (4.5), much of it ten or more, the stars of
# X-Spam-Level. Sending "very sure" spam to Trash by its stars would hide there the rare ham
# that scored that high, and teach nothing when it is moved back. Who wants it anyway puts
# a branch like this one first, with a cutoff well above what their own ham ever scores:
#   if header :contains "X-Spam-Level" "******************************" {
#       fileinto :create "Trash";
#       stop;
#   }
require ["fileinto", "mailbox"];

if header :is "X-Spam-Flag" "YES" {
    fileinto :create "Junk";
    stop;
}
